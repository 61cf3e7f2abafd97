// What a kernel launch carries: the per-channel views and work items, passed
// by value as the kernel's parameter. By value matters: a launch captured
// into a CUDA graph keeps these bytes, so replays run the same work (a
// pointer to a host staging buffer would be re-read at replay time).
// Plain data, included by host code too.
#pragma once

#include "device/wait_report.h"
#include "device/windows.h"
#include "device/work.h"

namespace weft::device {

constexpr int kMaxKernelChannels = 32;
constexpr int kMaxKernelItems = 180;

struct KernelChannel {
  ChannelView view;
  uint16_t firstItem;
  uint16_t itemCount;
};

struct KernelArgs {
  uint32_t* abortFlag;  // host-mapped; set by ncclCommAbort, the proxy, or a block that timed out
  WaitReport* reports;  // host-mapped; one per block (core/cuda_watch.cc)
  int64_t timeoutNs;    // WEFT_TIMEOUT per wait; 0: none
  const WindowTable* windows;  // the communicator's registered windows, device memory (null: none)
  int32_t nchannels;
  int32_t pad;
  KernelChannel channels[kMaxKernelChannels];
  WorkItem items[kMaxKernelItems];
};

// CUDA 12.1+ accepts kernel parameters up to 32764 bytes.
static_assert(sizeof(KernelArgs) <= 32764, "KernelArgs must fit in a kernel's parameter space");

// Which kernel runs a batch: data movement only (AllGather, Broadcast,
// send/recv), or a reduction of one type with one functor.
struct KernelKey {
  bool dataOnly;
  DataType dtype;
  RedOpKind op;
};

}  // namespace weft::device

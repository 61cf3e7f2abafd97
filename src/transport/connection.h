// A connection: one direction between this rank and one peer on one channel,
// as the data path sees it (a FifoEnd), plus whatever keeps its memory alive.
#pragma once

#include <cstdint>
#include <memory>

#include "device/step_fifo.h"

namespace weft::transport {

class Transport;
struct NetLink;

struct Connection {
  device::FifoEnd end{};
  // Owns the FIFO memory or its mapping. In-process peers share ownership, so
  // the memory outlives whichever side is destroyed first.
  std::shared_ptr<void> keepAlive;
  const Transport* transport = nullptr;
  // cuda backend: a copy of `end` in device memory, which kernels read and
  // whose `step` they advance (owned by deviceEndOwner).
  device::FifoEnd* deviceEnd = nullptr;
  std::shared_ptr<void> deviceEndOwner;

  // net transport: what the proxy drives (owned through keepAlive).
  NetLink* netLink = nullptr;

  bool connected() const { return transport != nullptr; }
};

// Byte layout of a FIFO's memory: control words, the Simple slots, the LL
// region (kLineSteps steps of llStepBytesFor(stepBytes) line bytes), then
// the LL128 region (kLineSteps steps of ll128StepBytesFor(stepBytes)).
// Every transport lays its FIFO out this way, so every link has all three;
// the net transport's proxy moves only the slots, so LL and LL128 are
// planned only for links within a node. The memory must start zeroed (no
// line flag is 0 once its slot was written).
struct FifoLayout {
  static constexpr size_t kControlBytes = 4096;  // FifoControl, padded to a page
  static size_t llOffset(int64_t stepBytes) {
    return kControlBytes + static_cast<size_t>(stepBytes) * device::kFifoSteps;
  }
  // On a 128-byte boundary: a warp stores each LL128 line as one transaction.
  static size_t ll128Offset(int64_t stepBytes) {
    const size_t end =
        llOffset(stepBytes) + static_cast<size_t>(device::llStepBytesFor(stepBytes)) * device::kLineSteps;
    return (end + 127) / 128 * 128;
  }
  // Whole pages: the memory comes from aligned_alloc(4096, ...), mmap or
  // pinned allocations, and aligned_alloc wants a multiple of its alignment.
  static size_t totalBytes(int64_t stepBytes) {
    const size_t bytes =
        ll128Offset(stepBytes) + static_cast<size_t>(device::ll128StepBytesFor(stepBytes)) * device::kLineSteps;
    return (bytes + kControlBytes - 1) / kControlBytes * kControlBytes;
  }
  // Points `end` into memory laid out as above, from the given side.
  static void attach(void* base, int64_t stepBytes, int peer, device::FifoEnd* end);
};

}  // namespace weft::transport

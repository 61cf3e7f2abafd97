// Registered windows (ncclCommWindowRegister) as the cuda team sees them:
// how a direct call between processes reaches a peer's output buffer.
//
// Registering a window is collective: every rank gives its buffer, and each
// learns where every local peer's buffer of the same registration lies in
// its own address space (a CUDA IPC mapping, core/cuda_windows.cc). Windows
// carry an id, the same on every rank (the registrations' order, which is
// the same on every rank because the call is collective).
//
//   consumer  describeWindow: its output lies in window `id` at `offset`
//             (DirectPost::segment = id, segOffset = offset, segBytes = the
//             call's output bytes); no window: segment 0
//   producer  resolveWindow: its table's entry for that id, the consumer's
//             base in this process plus the offset, when the peer's window
//             was mapped and holds the whole range; else the slots
//
// The two ends may still choose differently per call: the producer says per
// step whether it wrote directly (FifoControl::directStep).
#pragma once

#include "device/portable.h"
#include "device/step_fifo.h"

namespace weft::device {

// Where one rank's buffer of a window lies in this process (base 0: not
// reachable: another node, a peer that could not export it, or one this
// process could not map) and how many bytes it holds.
struct WindowPeer {
  uint64_t base;
  uint64_t bytes;
};

struct WindowView {
  uint64_t id;     // 1, 2, ... in registration order; never 0
  uint64_t base;   // this rank's buffer
  uint64_t bytes;  // its size
  const WindowPeer* peers;  // nranks entries, this rank's own among them
};

struct WindowTable {
  int32_t count;
  int32_t nranks;
  const WindowView* windows;
};

// The window holding [base, base + bytes) of this rank's memory, if any.
WEFT_HD DirectPost describeWindow(const WindowTable* table, const void* base, uint64_t bytes) {
  const auto at = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base));
  if (table != nullptr)
    for (int w = 0; w < table->count; ++w) {
      const WindowView& win = table->windows[w];
      if (at >= win.base && bytes <= win.bytes && at - win.base <= win.bytes - bytes)
        return DirectPost{at, win.id, at - win.base, bytes, 0};
    }
  return DirectPost{at, 0, 0, 0, 0};
}

// How to write a peer's posted output: a pointer into this process's mapping
// of its window, or the slots.
WEFT_HD DirectWay resolveWindow(const WindowTable* table, int peer, const DirectPost& post, uint64_t* addr) {
  if (table == nullptr || post.segment == 0 || peer < 0 || peer >= table->nranks) return DirectWay::kSlot;
  for (int w = 0; w < table->count; ++w) {
    const WindowView& win = table->windows[w];
    if (win.id != post.segment) continue;
    const WindowPeer& p = win.peers[peer];
    if (p.base == 0 || post.segBytes > p.bytes || post.segOffset > p.bytes - post.segBytes) return DirectWay::kSlot;
    *addr = p.base + post.segOffset;
    return DirectWay::kPointer;
  }
  return DirectWay::kSlot;
}

}  // namespace weft::device

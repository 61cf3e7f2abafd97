// Registered windows of a cuda communicator (ncclCommWindowRegister), the
// parts that need no GPU: what each rank tells the others when a window is
// registered, where each peer's buffer lies in this process, and the table
// the kernels read (device/windows.h) laid out in one block.
//
// Reaching a peer's buffer (windowPeers):
//   this rank               its own buffer
//   another node            unreachable
//   this process            its address, when on this rank's GPU (such
//                           links are kReachAddress and never ask; listed
//                           for completeness); else unreachable
//   another process, here   the peer exported its allocation (CUDA IPC):
//                           this process's mapping of it plus the buffer's
//                           offset in it; unreachable when the mapping fails
// Unreachable peers get base 0: direct calls to them use the slots.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "device/windows.h"

namespace weft::core {

struct PeerInfo;

constexpr size_t kWindowIpcBytes = 64;

// One rank's part of a window registration, all-gathered.
struct WindowRecord {
  uint64_t base;         // the buffer, in its owner's address space
  uint64_t bytes;        // its size
  uint64_t allocOffset;  // the buffer's offset in its allocation (where an IPC mapping starts)
  int32_t exported;      // 1: ipc holds a handle of the allocation
  int32_t pad;
  char ipc[kWindowIpcBytes];
};

// Maps a peer's exported allocation into this process; returns the mapping
// (freed by the pointer's deleter) or an error (the peer is then unreachable).
using WindowOpener = std::function<Result<std::shared_ptr<void>>(int peer, const WindowRecord& record)>;

struct WindowReach {
  std::vector<device::WindowPeer> peers;        // per rank
  std::vector<std::shared_ptr<void>> mappings;  // what the opener made: kept while the window lives
  int unreachableLocal = 0;                     // peers on this node in other processes left on the slots
};

WindowReach windowPeers(int rank, const std::vector<PeerInfo>& info, const std::vector<WindowRecord>& records,
                        const WindowOpener& opener);

// A window of a cuda communicator, as its rank keeps it.
struct CudaWindow {
  uint64_t id;
  uint64_t base;
  uint64_t bytes;
  WindowReach reach;  // filled by the exchange (at registration, or at the group's end)
};

// One registered window as the table lists it.
struct WindowEntry {
  uint64_t id;
  uint64_t base;
  uint64_t bytes;
  const std::vector<device::WindowPeer>* peers;  // nranks entries
};

// The table of `windows` as one block of bytes that works once copied to
// `at` (the device address it will live at): the WindowTable first, then the
// views, then every window's peers, pointers relative to `at`.
std::vector<uint8_t> layOutWindowTable(const std::vector<WindowEntry>& windows, int nranks, uintptr_t at);

}  // namespace weft::core

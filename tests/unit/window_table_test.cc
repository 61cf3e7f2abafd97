// Registered windows of cuda communicators without a GPU: which peers a
// window reaches and how (core/window_table.h), and the kernels' table laid
// out in host memory, read by the same describe/resolve the cuda team calls
// (device/windows.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/window_table.h"
#include "device/windows.h"

namespace weft::core {
namespace {

PeerInfo peer(uint64_t host, uint64_t process, int dev) {
  PeerInfo p{};
  p.hostHash = host;
  p.processHash = process;
  p.cudaDev = dev;
  return p;
}

WindowRecord record(uint64_t base, uint64_t bytes, uint64_t offset, bool exported) {
  WindowRecord r{};
  r.base = base;
  r.bytes = bytes;
  r.allocOffset = offset;
  r.exported = exported ? 1 : 0;
  std::snprintf(r.ipc, sizeof r.ipc, "handle-%llu", static_cast<unsigned long long>(base));
  return r;
}

// Rank 0 sees: itself; rank 1 in its process on its GPU; rank 2 in another
// process of its node (exported: mapped); rank 3 on another node; rank 4 in
// another process, not exported; rank 5 in another process whose mapping
// fails; rank 6 in its process on another GPU.
TEST(WindowTable, PeersReachedByProcessNodeAndExport) {
  const std::vector<PeerInfo> info = {peer(1, 10, 0), peer(1, 10, 0), peer(1, 20, 0), peer(2, 30, 0),
                                      peer(1, 40, 0), peer(1, 50, 1), peer(1, 10, 1)};
  const std::vector<WindowRecord> records = {
      record(0x1000, 4096, 0, true),    record(0x9000, 4096, 0, true),     record(0x20000, 8192, 256, true),
      record(0x30000, 8192, 0, true),   record(0x40000, 8192, 0, false),   record(0x50000, 8192, 0, true),
      record(0x60000, 8192, 0, true)};
  std::vector<int> opened;
  static char mapping[64];
  WindowOpener opener = [&](int r, const WindowRecord& rec) -> Result<std::shared_ptr<void>> {
    opened.push_back(r);
    EXPECT_EQ(std::string(rec.ipc), "handle-" + std::to_string(rec.base)) << "rank " << r << "'s own handle";
    if (r == 5) return errorStatus(ncclUnhandledCudaError, "cudaIpcOpenMemHandle failed");
    return std::shared_ptr<void>(mapping, [](void*) {});
  };
  const WindowReach reach = windowPeers(0, info, records, opener);
  ASSERT_EQ(reach.peers.size(), 7u);
  EXPECT_EQ(reach.peers[0].base, 0x1000u);
  EXPECT_EQ(reach.peers[1].base, 0x9000u);
  EXPECT_EQ(reach.peers[2].base, reinterpret_cast<uintptr_t>(mapping) + 256) << "the mapping plus the offset";
  EXPECT_EQ(reach.peers[2].bytes, 8192u);
  EXPECT_EQ(reach.peers[3].base, 0u) << "another node";
  EXPECT_EQ(reach.peers[4].base, 0u) << "not exported";
  EXPECT_EQ(reach.peers[5].base, 0u) << "the mapping failed";
  EXPECT_EQ(reach.peers[6].base, 0u) << "this process, another GPU";
  EXPECT_EQ(opened, (std::vector<int>{2, 5})) << "only exported buffers of this node's other processes are opened";
  EXPECT_EQ(reach.mappings.size(), 1u);
  EXPECT_EQ(reach.unreachableLocal, 2);
}

// Two windows of 3 ranks laid out at the address of a host buffer: the table
// is then readable in place, as the kernels read their device copy.
struct LaidOut {
  std::vector<uint64_t> storage;
  const device::WindowTable* table() const { return reinterpret_cast<const device::WindowTable*>(storage.data()); }
};

LaidOut layOut(const std::vector<WindowEntry>& entries, int nranks) {
  LaidOut out;
  const size_t bytes = layOutWindowTable(entries, nranks, 0).size();
  out.storage.assign((bytes + 7) / 8, 0);
  const std::vector<uint8_t> block =
      layOutWindowTable(entries, nranks, reinterpret_cast<uintptr_t>(out.storage.data()));
  EXPECT_EQ(block.size(), bytes);
  std::memcpy(out.storage.data(), block.data(), block.size());
  return out;
}

TEST(WindowTable, ConsumerNamesItsWindowAndProducerWritesThroughItsMapping) {
  const std::vector<device::WindowPeer> first = {{0x10000, 4096}, {0x70000, 4096}, {0, 0}};
  const std::vector<device::WindowPeer> second = {{0x20000, 1024}, {0x80000, 512}, {0x90000, 1024}};
  const LaidOut t = layOut({{3, 0x10000, 4096, &first}, {7, 0x20000, 1024, &second}}, 3);
  const device::WindowTable* table = t.table();
  ASSERT_EQ(table->count, 2);
  ASSERT_EQ(table->nranks, 3);

  // Consumer side (rank 0): its output in the second window.
  const device::DirectPost in =
      device::describeWindow(table, reinterpret_cast<const void*>(uintptr_t{0x20000 + 128}), 256);
  EXPECT_EQ(in.segment, 7u);
  EXPECT_EQ(in.segOffset, 128u);
  EXPECT_EQ(in.segBytes, 256u);
  EXPECT_EQ(in.base, 0x20000u + 128);
  // Outside every window, or running past its end: no window.
  EXPECT_EQ(device::describeWindow(table, reinterpret_cast<const void*>(uintptr_t{0x50000}), 8).segment, 0u);
  EXPECT_EQ(device::describeWindow(table, reinterpret_cast<const void*>(uintptr_t{0x20000 + 1000}), 64).segment, 0u);
  EXPECT_EQ(device::describeWindow(table, reinterpret_cast<const void*>(uintptr_t{0x10000}), 4096).segment, 3u);
  EXPECT_EQ(device::describeWindow(nullptr, reinterpret_cast<const void*>(uintptr_t{0x10000}), 8).segment, 0u);

  // Producer side: the same post from rank 2 (whose window 7 this rank
  // mapped at 0x90000) and from rank 1 (mapped at 0x80000, 512 bytes).
  uint64_t addr = 0;
  device::DirectPost post{0xdead0000, 7, 128, 256, 0};
  EXPECT_EQ(device::resolveWindow(table, 2, post, &addr), device::DirectWay::kPointer);
  EXPECT_EQ(addr, 0x90000u + 128);
  EXPECT_EQ(device::resolveWindow(table, 1, post, &addr), device::DirectWay::kPointer);
  EXPECT_EQ(addr, 0x80000u + 128);
  post.segBytes = 512;  // 128 + 512 runs past rank 1's 512 bytes
  EXPECT_EQ(device::resolveWindow(table, 1, post, &addr), device::DirectWay::kSlot);
  post = device::DirectPost{0, 3, 0, 64, 0};
  EXPECT_EQ(device::resolveWindow(table, 2, post, &addr), device::DirectWay::kSlot) << "rank 2 is not mapped in 3";
  EXPECT_EQ(device::resolveWindow(table, 1, post, &addr), device::DirectWay::kPointer);
  EXPECT_EQ(addr, 0x70000u);
  post.segment = 5;  // no such window here
  EXPECT_EQ(device::resolveWindow(table, 1, post, &addr), device::DirectWay::kSlot);
  post.segment = 0;  // the consumer's output is in no window
  EXPECT_EQ(device::resolveWindow(table, 1, post, &addr), device::DirectWay::kSlot);
  post.segment = 3;
  EXPECT_EQ(device::resolveWindow(table, 3, post, &addr), device::DirectWay::kSlot) << "rank out of range";
  EXPECT_EQ(device::resolveWindow(nullptr, 1, post, &addr), device::DirectWay::kSlot);
}

TEST(WindowTable, EmptyTableHasNoWindows) {
  const LaidOut t = layOut({}, 4);
  EXPECT_EQ(t.table()->count, 0);
  EXPECT_EQ(t.table()->windows, nullptr);
  uint64_t addr = 0;
  EXPECT_EQ(device::resolveWindow(t.table(), 1, device::DirectPost{0, 1, 0, 8, 0}, &addr), device::DirectWay::kSlot);
}

}  // namespace
}  // namespace weft::core

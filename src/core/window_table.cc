#include "core/window_table.h"

#include <cstring>

#include "common/log.h"
#include "core/comm.h"

namespace weft::core {

WindowReach windowPeers(int rank, const std::vector<PeerInfo>& info, const std::vector<WindowRecord>& records,
                        const WindowOpener& opener) {
  WindowReach reach;
  const int nranks = static_cast<int>(records.size());
  reach.peers.assign(static_cast<size_t>(nranks), device::WindowPeer{0, 0});
  const PeerInfo& me = info[static_cast<size_t>(rank)];
  for (int r = 0; r < nranks; ++r) {
    const WindowRecord& rec = records[static_cast<size_t>(r)];
    const PeerInfo& peer = info[static_cast<size_t>(r)];
    device::WindowPeer& out = reach.peers[static_cast<size_t>(r)];
    if (r == rank) {
      out = device::WindowPeer{rec.base, rec.bytes};
    } else if (peer.hostHash != me.hostHash || rec.base == 0) {
      continue;
    } else if (peer.processHash == me.processHash) {
      if (peer.cudaDev == me.cudaDev) out = device::WindowPeer{rec.base, rec.bytes};
    } else if (rec.exported == 0) {
      reach.unreachableLocal += 1;
    } else {
      Result<std::shared_ptr<void>> mapped = opener(r, rec);
      if (!mapped.ok()) {
        WEFT_INFO(log::kAlloc, "window: rank %d cannot map rank %d's buffer (%s); calls to it use the FIFO", rank,
                  r, mapped.status().message().c_str());
        reach.unreachableLocal += 1;
        continue;
      }
      const auto at = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(mapped.value().get()));
      out = device::WindowPeer{at + rec.allocOffset, rec.bytes};
      reach.mappings.push_back(std::move(mapped).value());
    }
  }
  return reach;
}

std::vector<uint8_t> layOutWindowTable(const std::vector<WindowEntry>& windows, int nranks, uintptr_t at) {
  const size_t nw = windows.size();
  const size_t viewsAt = sizeof(device::WindowTable);
  const size_t peersAt = viewsAt + nw * sizeof(device::WindowView);
  const size_t peerBytes = static_cast<size_t>(nranks) * sizeof(device::WindowPeer);
  std::vector<uint8_t> block(peersAt + nw * peerBytes, 0);
  device::WindowTable table{static_cast<int32_t>(nw), nranks,
                            nw > 0 ? reinterpret_cast<const device::WindowView*>(at + viewsAt) : nullptr};
  std::memcpy(block.data(), &table, sizeof table);
  for (size_t w = 0; w < nw; ++w) {
    const WindowEntry& e = windows[w];
    const size_t mine = peersAt + w * peerBytes;
    device::WindowView view{e.id, e.base, e.bytes, reinterpret_cast<const device::WindowPeer*>(at + mine)};
    std::memcpy(block.data() + viewsAt + w * sizeof(device::WindowView), &view, sizeof view);
    std::memcpy(block.data() + mine, e.peers->data(), peerBytes);
  }
  return block;
}

}  // namespace weft::core

#include "core/cuda_watch.h"

#include "device/atomics.h"

namespace weft::core {

bool recordedWaitFailure(const device::WaitReport* reports, int n, device::WaitFailureInfo* out) {
  for (int i = 0; i < n; ++i) {
    // Acquire pairs with the block's release of the word: kind and waitedNs,
    // written before it, are visible.
    const uint64_t word = device::loadAcquire(&reports[i].word);
    if (device::waitWordState(word) != device::WaitState::kFailed) continue;
    out->kind = static_cast<device::WaitFailure>(device::loadRelaxed(&reports[i].kind));
    out->site = device::waitWordSite(word);
    out->waitedNs = device::loadRelaxed(&reports[i].waitedNs);
    if (out->kind == device::WaitFailure::kMismatch) {
      out->theirs = {device::loadRelaxed(&reports[i].theirs[0]), device::loadRelaxed(&reports[i].theirs[1])};
      out->ours = {device::loadRelaxed(&reports[i].ours[0]), device::loadRelaxed(&reports[i].ours[1])};
    }
    return true;
  }
  return false;
}

bool waitOnExitedPeer(const device::WaitReport* reports, int n, const pid_t* peerPids, int nranks, bool (*alive)(pid_t),
                      device::WaitFailureInfo* out) {
  if (peerPids == nullptr) return false;
  for (int i = 0; i < n; ++i) {
    const uint64_t word = device::loadRelaxed(&reports[i].word);
    if (device::waitWordState(word) != device::WaitState::kWaiting) continue;
    const device::WaitSite site = device::waitWordSite(word);
    if (site.peer < 0 || site.peer >= nranks || peerPids[site.peer] == 0 || alive(peerPids[site.peer])) continue;
    out->kind = device::WaitFailure::kPeerExited;
    out->site = site;
    out->waitedNs = 0;  // the host does not know since when
    return true;
  }
  return false;
}

}  // namespace weft::core

#include "core/failure.h"

#include <algorithm>
#include <string>

#include "common/log.h"
#include "common/process.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/datatypes.h"

namespace weft::core {
namespace {

// "AllReduce(count 1024, float, sum, ring, collective #17)": a call as its
// signature tells it (device/signature.h). AllGather and Broadcast move
// bytes whatever the type: their size is in bytes.
std::string describeCall(const device::CallSignature& sig) {
  using device::Func;
  static const char* const kFuncs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"};
  static const char* const kOps[] = {"sum", "prod", "max", "min", "premulsum", "avg"};
  static const char* const kAlgos[] = {
      "ring", "tree", "one-shot", "butterfly", "halving-doubling", "hierarchical ring", "2D torus"};
  static_assert(sizeof(kAlgos) / sizeof(kAlgos[0]) == static_cast<size_t>(device::Algo::kCount),
                "a name per algorithm");
  if ((sig.word & device::kCallWordValid) == 0) return "another call (its arguments did not arrive in time to name it)";
  const device::CallFields f = device::unpackCallWord(sig.word);
  const auto func = static_cast<Func>(f.func);
  const auto count = static_cast<unsigned long long>(sig.count);
  if (func == Func::kSendRecv) return strFormat("Send/Recv(%llu bytes)", count);
  if (f.func < 0 || f.func >= static_cast<int>(Func::kSendRecv))
    return strFormat("an unknown call (%#llx)", static_cast<unsigned long long>(sig.word));
  std::string text;
  if (func == Func::kAllGather || func == Func::kBroadcast)
    text = strFormat("%s(%llu bytes%s", kFuncs[f.func], count, func == Func::kAllGather ? " per rank" : "");
  else
    text = strFormat("%s(count %llu, %s, %s", kFuncs[f.func], count, typeName(static_cast<ncclDataType_t>(f.dtype)),
                     f.op >= 0 && f.op < 6 ? kOps[f.op] : "op?");
  if (f.root >= 0) text += strFormat(", root %d", f.root);
  return text +
         strFormat(", %s, collective #%u)",
                   f.algo >= 0 && f.algo < static_cast<int>(device::Algo::kCount) ? kAlgos[f.algo] : "algorithm?",
                   f.seq);
}

// The other end of the link a network failure was on: the one recorded
// (injectLinkFailure), else the peer this rank waited on.
int failedLinkPeer(const Comm& comm, const device::WaitFailureInfo& failure) {
  const int recorded = comm.failedLinkPeer.load(std::memory_order_acquire);
  return recorded >= 0 ? recorded : failure.site.peer;
}

// The link failed but its other rank is alive: name the link and the way
// out. `waiting`: what this rank was doing when its wait stopped.
Status linkFailure(const Comm& comm, int peer, const std::string& waiting, const Status& why) {
  const int lo = std::min(comm.rank, peer), hi = std::max(comm.rank, peer);
  return Status(why.code(),
                strFormat("rank %d: link %d-%d failed: %s (this rank was waiting %s). Rank %d is alive (its "
                          "bootstrap listener answers): recreate the communicator with WEFT_BROKEN_LINKS=%d-%d to "
                          "keep collectives off the link; this communicator is unusable: destroy or abort it",
                          comm.rank, lo, hi, why.message().c_str(), waiting.c_str(), peer, lo, hi));
}

}  // namespace

void injectLinkFailure(Comm* comm, int peer, const std::string& why) {
  comm->failedLinkWhy = why;
  comm->failedLinkPeer.store(peer, std::memory_order_release);
  comm->netFailed.store(1, std::memory_order_release);
}

Status describeWaitFailure(const Comm& comm, const device::WaitFailureInfo& failure) {
  const int peer = failure.site.peer;
  const char* waitingFor = failure.site.isSend ? "to free a FIFO slot (consume our data)" : "to send data";
  std::string where = "unknown peer";
  if (peer >= 0 && peer < comm.nranks) {
    const PeerInfo& info = comm.peers[static_cast<size_t>(peer)];
    where = strFormat("rank %d (pid %d on host %s)", peer, info.pid, info.hostname);
  }
  const double seconds = static_cast<double>(failure.waitedNs) / 1e9;
  switch (failure.kind) {
    case device::WaitFailure::kAborted:
      return errorStatus(ncclInvalidUsage,
                         "rank %d: communicator aborted (ncclCommAbort) while waiting on channel %d for %s %s",
                         comm.rank, failure.site.channel, where.c_str(), waitingFor);
    case device::WaitFailure::kPeerExited: {
      // A cuda kernel's wait is found by the host, which does not know since when.
      const std::string waited =
          failure.waitedNs > 0 ? strFormat("waited %.1f s", seconds) : std::string("waited (over 1 ms)");
      return errorStatus(ncclRemoteError,
                         "rank %d: %s exited while this rank %s on channel %d for it %s; the communicator "
                         "is unusable: destroy or abort it",
                         comm.rank, where.c_str(), waited.c_str(), failure.site.channel, waitingFor);
    }
    case device::WaitFailure::kTimeout:
      return errorStatus(
          ncclRemoteError,
          "rank %d: waited %.0f s on channel %d for %s %s (WEFT_TIMEOUT=%lld). The peer is alive but not "
          "progressing: is it blocked elsewhere, or calling collectives in a different order?",
          comm.rank, seconds, failure.site.channel, where.c_str(), waitingFor,
          static_cast<long long>(comm.waitConfig.timeoutNs / 1000000000ll));  // as read at init
    case device::WaitFailure::kPeerFailed: {
      const Status noticed = noticedFailure(comm);
      return Status(noticed.ok() ? ncclRemoteError : noticed.code(),
                    strFormat("%s. This rank was waiting on channel %d for %s %s; the communicator is unusable: "
                              "destroy or abort it",
                              noticed.ok() ? "a peer failed" : noticed.message().c_str(), failure.site.channel,
                              where.c_str(), waitingFor));
    }
    case device::WaitFailure::kNetwork: {
      // The proxy's message names the link (peer, host, channel, direction).
      Status net = comm.proxy ? comm.proxy->failure() : Status();
      const int linkPeer = failedLinkPeer(comm, failure);
      if (net.ok() && comm.failedLinkPeer.load(std::memory_order_acquire) >= 0)
        net = errorStatus(ncclSystemError, "%s", comm.failedLinkWhy.c_str());
      if (net.ok()) net = errorStatus(ncclSystemError, "the network failed");
      if (linkPeer >= 0 && linkPeer < comm.nranks && linkPeer != comm.rank && comm.bootstrap &&
          comm.bootstrap->peerAlive(linkPeer))
        return linkFailure(comm, linkPeer,
                           strFormat("on channel %d for %s %s", failure.site.channel, where.c_str(), waitingFor), net);
      return Status(net.code(),
                    strFormat("rank %d: waiting on channel %d for %s %s: %s. A peer on another node "
                              "exited, aborted or lost its network; the communicator is unusable: "
                              "destroy or abort it",
                              comm.rank, failure.site.channel, where.c_str(), waitingFor, net.message().c_str()));
    }
    case device::WaitFailure::kMismatch:
      return errorStatus(ncclInvalidUsage,
                         "rank %d: mismatched calls on channel %d: this rank called %s, %s sent data for %s. "
                         "Every rank must make the same calls in the same order, with the same count, datatype, "
                         "op and root (and a receive the size of its send); the communicator is unusable: destroy or "
                         "abort it",
                         comm.rank, failure.site.channel, describeCall(failure.ours).c_str(), where.c_str(),
                         describeCall(failure.theirs).c_str());
    default: return okStatus();
  }
}

Status noticedFailure(const Comm& comm) {
  if (!comm.bootstrap || !comm.bootstrap->noticed()) return okStatus();
  return comm.bootstrap->noticeStatus();
}

int noticeGraceMs(const Comm& comm, const device::WaitFailureInfo& failure) {
  switch (failure.kind) {
    case device::WaitFailure::kPeerExited:
    case device::WaitFailure::kNetwork: return kNoticeGraceMs;
    case device::WaitFailure::kTimeout: {
      const int peer = failure.site.peer;
      const pid_t pid = peer >= 0 && peer < comm.nranks && !comm.peerPids.empty() ? comm.peerPids[peer] : 0;
      return pid > 0 && processStopped(pid) ? 0 : kTimeoutNoticeGraceMs;
    }
    default: return 0;
  }
}

int connectNoticeGraceMs(const Comm& comm) {
  const int peer = comm.bootstrap ? comm.bootstrap->suspect() : -1;
  if (peer < 0 || peer >= comm.nranks) return kNoticeGraceMs;
  const pid_t pid = comm.peerPids.empty() ? 0 : comm.peerPids[static_cast<size_t>(peer)];
  // Stopped: it is the culprit. Exited: the bootstrap already waited for a
  // notice when it found it gone (Bootstrap::peerGone).
  if (pid > 0 && (processStopped(pid) || !processAlive(pid))) return 0;
  return kTimeoutNoticeGraceMs;
}

bool awaitNotice(const Comm& comm, int graceMs) { return comm.bootstrap && comm.bootstrap->awaitNotice(graceMs); }

void reportInitFailure(Comm* comm, const Status& why) {
  if (!comm->bootstrap) return;
  if (!comm->bootstrap->noticed()) {
    const int suspect = comm->bootstrap->suspect();
    reportFailure(comm, suspect >= 0 ? suspect : comm->rank, why);
    return;
  }
  if (comm->failureReported.exchange(true)) return;
  const BootstrapMailbox::Notice notice = comm->bootstrap->firstNotice();
  comm->bootstrap->notifyFailure(notice.origin, notice.why);
}

int failureOrigin(const Comm& comm, const device::WaitFailureInfo& failure) {
  const int peer = failure.site.peer;
  return peer >= 0 && peer < comm.nranks ? peer : comm.rank;
}

void watchFailureNotices(Comm* comm) {
  if (!comm->bootstrap) return;
  auto onNotice = [comm](const BootstrapMailbox::Notice&) {
    comm->peerFailed.store(1, std::memory_order_release);
    int ready = static_cast<int>(CommState::kReady);
    comm->state.compare_exchange_strong(ready, static_cast<int>(CommState::kFailed));
    ncclResult_t none = ncclSuccess;
    comm->asyncError.compare_exchange_strong(none, ncclRemoteError);
    // Kernels poll their abort flag, not the host's: stop them too.
    if (comm->backend == weftBackendCuda) proxyFailureFlag(comm)->store(1, std::memory_order_release);
  };
  comm->bootstrap->setNoticeHandler(onNotice);
  // A notice that came before the handler was set.
  if (comm->bootstrap->noticed()) onNotice(BootstrapMailbox::Notice{});
}

void unwatchFailureNotices(Comm* comm) {
  if (comm->bootstrap) comm->bootstrap->setNoticeHandler(nullptr);
}

void reportFailure(Comm* comm, int origin, const Status& why) {
  if (!comm->bootstrap || comm->bootstrap->noticed() || comm->failureReported.exchange(true)) return;
  WEFT_INFO(log::kInit, "rank %d: reporting the failure of rank %d to every peer", comm->rank, origin);
  comm->bootstrap->notifyFailure(origin, why.message());
}

}  // namespace weft::core

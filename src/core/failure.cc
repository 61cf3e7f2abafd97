#include "core/failure.h"

#include "core/comm.h"

namespace weft::core {

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
    case device::WaitFailure::kNetwork: {
      // The proxy's message names the link (peer, host, channel, direction).
      Status net = comm.proxy ? comm.proxy->failure() : Status();
      if (net.ok()) net = errorStatus(ncclSystemError, "the network failed");
      return Status(net.code(),
                    strFormat("rank %d: waiting on channel %d for %s %s: %s. A peer on another node "
                              "exited, aborted or lost its network; the communicator is unusable: "
                              "destroy or abort it",
                              comm.rank, failure.site.channel, where.c_str(), waitingFor, net.message().c_str()));
    }
    default: return okStatus();
  }
}

}  // namespace weft::core

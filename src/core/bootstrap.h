// Per-rank bootstrap: a TCP ring among the ranks of a communicator plus
// tagged point-to-point messages, used during set-up (peer information,
// connection blobs, split) and never on the data path.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "core/bootstrap_wire.h"
#include "core/unique_id.h"

namespace weft::core {

class Bootstrap {
 public:
  // Joins the communicator described by `id` as `rank` of `nranks`. Every
  // blocking step polls `abortFlag` and gives up after WEFT_BOOTSTRAP_TIMEOUT.
  static Result<std::unique_ptr<Bootstrap>> join(const UniqueIdContents& id, int rank, int nranks,
                                                 const std::atomic<uint32_t>* abortFlag);

  // Builds a bootstrap among ranks that already know each other's listen
  // addresses (ncclCommSplit): `listen` must be the socket whose address is
  // addresses[rank].
  static Result<std::unique_ptr<Bootstrap>> fromAddresses(int rank, std::vector<SocketAddress> addresses, Socket listen,
                                                          uint64_t secret, const std::atomic<uint32_t>* abortFlag);

  // A listen socket on the interface NCCL_SOCKET_IFNAME selects.
  static Result<Socket> listenOnBootstrapInterface();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t secret() const { return secret_; }

  // data holds nranks slots of `bytes`; slot rank is ours, the rest is filled in.
  Status allGather(void* data, size_t bytes);
  Status barrier();
  Status send(int peer, int tag, const void* data, size_t bytes);
  Status recv(int peer, int tag, void* data, size_t bytes);

 private:
  struct Message {
    int from;
    int tag;
    std::vector<char> data;
  };

  Bootstrap(int rank, int nranks, uint64_t secret, Socket listen, const std::atomic<uint32_t>* abortFlag);
  struct Incoming {
    Socket socket;
    int from;
    int tag;
    uint64_t bytes;
  };

  Status connectRing(const SocketAddress& next);
  // Accepts the next connection that presents our secret (others are dropped).
  Result<Incoming> acceptOne(const char* waitingFor);
  Status readMessage(Incoming& in, Message* out);
  Status exchange(const void* sendData, void* recvData, size_t bytes);
  Deadline deadline() const;
  Status checkAbort() const;

  int rank_;
  int nranks_;
  uint64_t secret_;
  Socket listen_;
  Socket ringNext_;
  Socket ringPrev_;
  std::vector<SocketAddress> peers_;
  std::deque<Message> unexpected_;
  std::mutex mutex_;
  const std::atomic<uint32_t>* abortFlag_;
};

}  // namespace weft::core

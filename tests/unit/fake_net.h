// An in-memory network behind a weftNet_v8_t table, for driving the proxy
// without sockets. One FakeNet is one connection: a send comm and a receive
// comm whose isends and irecvs match in posting order.
//
// It behaves like a slow, fussy network so the proxy's use of the contract
// shows: a request completes only after a set number of `test` calls; a send
// reads its buffer only when it completes (a slot freed early would be sent
// with the producer's next bytes); some posts answer "busy"; any call can be
// made to fail. It counts what the proxy did, and flags misuse (testing a
// finished request, sending from unregistered memory, out-of-order tests).
#pragma once

#include <cstdint>
#include <deque>
#include <set>
#include <vector>

#include "transport/net/net_plugin.h"
#include "transport/net/net_v8.h"

namespace weft::testing {

class FakeNet {
 public:
  struct Options {
    int testsBeforeDone = 0;            // failed `test` calls before a request may complete
    int busyEvery = 0;                  // every n-th isend/irecv answers busy (0: never)
    int maxInFlight = kNetMaxRequests;  // per comm; more posts answer busy
  };
  enum class Call { kIsend, kIrecv, kTestSend, kTestRecv };

  explicit FakeNet(const Options& options);
  FakeNet(const FakeNet&) = delete;
  FakeNet& operator=(const FakeNet&) = delete;

  // What a NetLink's `net` points at.
  const transport::Network& network() const { return network_; }
  void* sendComm() { return &send_; }
  void* recvComm() { return &recv_; }

  // From the `after`-th such call on (0: the next), `call` returns `code`.
  void injectFault(Call call, ncclResult_t code, int after = 0);

  struct Counters {
    int64_t sendsPosted = 0;
    int64_t recvsPosted = 0;
    int64_t busyAnswers = 0;
    int64_t sendsDone = 0;
    int64_t recvsDone = 0;
    int maxSendsInFlight = 0;
    int maxRecvsInFlight = 0;
    int closes = 0;
    // Misuse, all of which must stay 0.
    int64_t deadRequestTests = 0;   // test on a request that finished or never was
    int64_t outOfOrderTests = 0;    // test on a request while an older one is pending
    int64_t unregisteredPosts = 0;  // a buffer outside the comm's registered region
    int64_t oversizedMessages = 0;  // a message larger than the receive it matched
  };
  const Counters& counters() const { return counters_; }

  // The C table's entry points land here.
  struct Comm;
  struct Request {
    Comm* comm;
    char* data;
    int64_t bytes;  // send: its size; receive: room
    int testsLeft;
    bool finished = false;
  };
  struct Comm {
    Comm(FakeNet* owner, bool sends) : net(owner), isSend(sends) {}
    FakeNet* net;
    bool isSend;
    char* regBegin = nullptr;
    char* regEnd = nullptr;
    int posts = 0;
    std::deque<Request*> pending;  // oldest first
  };
  ncclResult_t post(Comm* comm, char* data, int64_t bytes, void** request);
  ncclResult_t test(Request* request, int* done, int* size);
  ncclResult_t regMr(Comm* comm, void* data, size_t size, void** mhandle);
  void close() { counters_.closes += 1; }

 private:
  struct Fault {
    bool armed = false;
    ncclResult_t code = ncclSuccess;
    int after = 0;
  };
  bool faultFires(Call call, ncclResult_t* code);
  bool complete(Request* request, int* size, ncclResult_t* rc);

  Options options_;
  transport::Network network_;
  Comm send_;
  Comm recv_;
  std::deque<std::vector<char>> wire_;  // completed sends not yet received
  // Every request ever posted, never freed: a finished request's address is
  // not reused, so a test on it is always caught.
  std::deque<Request> requests_;
  std::set<const Request*> known_;
  Fault faults_[4];
  Counters counters_;
};

}  // namespace weft::testing

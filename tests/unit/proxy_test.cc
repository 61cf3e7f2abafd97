// The proxy's progress engine, driven by progressOnce() with no thread over
// an in-memory network (fake_net.h), and once with its thread over the real
// socket network. The test plays the data path: it publishes steps into the
// send link's FIFO and consumes them from the receive link's FIFO.
#include "proxy/proxy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "fake_net.h"
#include "net_test_util.h"
#include "transport/connection.h"
#include "transport/net/net_link.h"

namespace weft::testing {
namespace {

using device::FifoEnd;
using proxy::ProgressEngine;
using transport::NetLink;

// Gives `link` a zeroed network FIFO of `stepBytes` slots, and `dataPath`
// the other end of it (the data path's view of the same memory).
void attachFifo(NetLink* link, int64_t stepBytes, FifoEnd* dataPath) {
  const size_t bytes = transport::netFifoBytes(stepBytes);
  void* base = std::aligned_alloc(4096, bytes);
  ASSERT_NE(base, nullptr);
  std::memset(base, 0, bytes);
  link->memory = std::shared_ptr<void>(base, [](void* p) { std::free(p); });
  transport::attachNetFifo(transport::NetFifoMemory{link->memory, base, base}, stepBytes, link->peer, &link->fifo,
                           dataPath);
}

// Bytes in step s: varied, never zero, sometimes a whole slot.
int64_t stepSize(uint64_t step, int64_t stepBytes) {
  if (step % 5 == 0) return stepBytes;
  return 1 + static_cast<int64_t>((step * 2654435761u) % static_cast<uint64_t>(stepBytes));
}

// The call signature the producer gives step s: different for every step.
device::CallSignature stepSignature(uint64_t step) {
  return {device::packCallWord({1, 7, 0, 0, -1, static_cast<uint32_t>(step)}), step * 3 + 1};
}

// The data path at both ends of one send link -> network -> receive link.
struct DataPath {
  FifoEnd producer{};
  FifoEnd consumer{};
  int64_t stepBytes = 0;

  // Publishes steps while the FIFO has room, up to `limit` in all.
  void produce(uint64_t limit) {
    while (producer.step < limit && device::fifoCanProduce(producer)) {
      const int64_t bytes = stepSize(producer.step, stepBytes);
      for (int64_t i = 0; i < bytes; ++i)
        device::fifoSlot(producer)[i] = static_cast<char>(patternByte(producer.step, i));
      const device::CallSignature sig = stepSignature(producer.step);
      device::fifoSign(producer, sig, device::callHash(sig));
      device::fifoPublish(producer, bytes);
    }
  }

  // Consumes what arrived (at most `most` steps), checking sizes and bytes.
  void consume(int most = 1 << 30) {
    for (; most > 0 && device::fifoCanConsume(consumer); --most) {
      const uint64_t step = consumer.step;
      const int64_t bytes = device::fifoSlotBytes(consumer);
      ASSERT_EQ(bytes, stepSize(step, stepBytes)) << "step " << step;
      ASSERT_EQ(firstMismatch(reinterpret_cast<const uint8_t*>(device::fifoSlot(consumer)), step, bytes), -1)
          << "step " << step;
      // The step's signature crossed the network with it (net_wire.h).
      const device::CallSignature sent = stepSignature(step);
      ASSERT_EQ(device::fifoSignatureHash(consumer), device::callHash(sent)) << "step " << step;
      ASSERT_EQ(device::fifoSignature(consumer).word, sent.word) << "step " << step;
      ASSERT_EQ(device::fifoSignature(consumer).count, sent.count) << "step " << step;
      device::fifoRelease(consumer);
    }
  }
};

// Makes `link` one direction of a connection as the core would (channel 5,
// ranks 0 -> 3), with its FIFO and registered slots.
void setUpLink(NetLink* link, const transport::Network& net, bool isSend, void* comm, FifoEnd* dataPath,
               int64_t stepBytes) {
  link->isSend = isSend;
  link->channel = 5;
  link->rank = isSend ? 0 : 3;
  link->peer = isSend ? 3 : 0;
  link->peerName = isSend ? "rank 3 (host far-away)" : "rank 0 (host near-by)";
  link->net = &net;
  link->comm = comm;
  ASSERT_NO_FATAL_FAILURE(attachFifo(link, stepBytes, dataPath));
  const size_t slots = static_cast<size_t>(stepBytes + link->fifo.slotGap) * device::kFifoSteps;
  ASSERT_EQ(net.api->regMr(comm, link->fifo.slots, slots, kNetPtrHost, &link->mhandle), ncclSuccess);
}

// A send and a receive link over one FakeNet.
struct FakeLinks {
  explicit FakeLinks(const FakeNet::Options& options, int64_t stepBytes = 1024) : net(options) {
    setUpLink(&send, net.network(), true, net.sendComm(), &path.producer, stepBytes);
    setUpLink(&recv, net.network(), false, net.recvComm(), &path.consumer, stepBytes);
    path.stepBytes = stepBytes;
  }

  FakeNet net;  // first: the links close their comms through it
  NetLink send;
  NetLink recv;
  DataPath path;
};

struct Flags {
  std::atomic<uint32_t> abort{0};
  std::atomic<uint32_t> failed{0};
};

void expectNoMisuse(const FakeNet::Counters& c) {
  EXPECT_EQ(c.deadRequestTests, 0);
  EXPECT_EQ(c.outOfOrderTests, 0);
  EXPECT_EQ(c.unregisteredPosts, 0);
  EXPECT_EQ(c.oversizedMessages, 0);
  EXPECT_LE(c.maxSendsInFlight, device::kFifoSteps);
  EXPECT_LE(c.maxRecvsInFlight, device::kFifoSteps);
}

struct FakeCase {
  const char* name;
  FakeNet::Options options;
  int consumerPace;  // steps the consumer takes per pass
};

std::string fakeCaseName(const ::testing::TestParamInfo<FakeCase>& c) { return c.param.name; }
void PrintTo(const FakeCase& c, std::ostream* os) { *os << c.name; }

class ProxyOverFake : public ::testing::TestWithParam<FakeCase> {};

// Three operations back to back on each link, then (once idle) two more: the
// second batch continues the step sequence. The producer runs ahead of the
// posted operations as far as the FIFO lets it, yet the engine must post
// exactly the operations' steps.
TEST_P(ProxyOverFake, EveryStepArrivesInOrderAndIdleMeansDone) {
  FakeLinks links(GetParam().options);
  Flags flags;
  ProgressEngine engine(0, &flags.abort, &flags.failed);
  const std::vector<std::vector<uint64_t>> batches = {{20, 5, 13}, {1, 30}};
  uint64_t allSteps = 0;
  for (const auto& batch : batches)
    for (uint64_t steps : batch) allSteps += steps;
  uint64_t target = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (uint64_t steps : batches[b]) {
      engine.post(&links.send, {b, steps});
      engine.post(&links.recv, {b, steps});
      target += steps;
    }
    EXPECT_FALSE(engine.idle());
    for (int pass = 0; links.path.consumer.step < target; ++pass) {
      ASSERT_LT(pass, 100000) << "stuck: consumed " << links.path.consumer.step << " of " << target;
      links.path.produce(allSteps);
      Result<bool> moved = engine.progressOnce();
      ASSERT_TRUE(moved.ok()) << moved.status().message();
      const bool allDone = links.send.completed == target && links.recv.completed == target;
      ASSERT_EQ(engine.idle(), allDone) << "pass " << pass;
      const FakeNet::Counters& c = links.net.counters();
      ASSERT_LE(c.sendsPosted, static_cast<int64_t>(target));
      ASSERT_LE(c.recvsPosted, static_cast<int64_t>(target));
      ASSERT_NO_FATAL_FAILURE(links.path.consume(GetParam().consumerPace));
    }
    // The consumer has everything, so every receive and (before it) every send completed.
    for (int pass = 0; pass < 10; ++pass) ASSERT_TRUE(engine.progressOnce().ok());
    EXPECT_TRUE(engine.idle());
    EXPECT_TRUE(engine.waitIdle(1000000000));
    EXPECT_EQ(links.net.counters().sendsPosted, static_cast<int64_t>(target));
    EXPECT_EQ(links.net.counters().recvsPosted, static_cast<int64_t>(target));
    EXPECT_EQ(links.send.posted, target);
    EXPECT_EQ(links.recv.posted, target);
  }
  EXPECT_EQ(links.net.counters().recvsDone, static_cast<int64_t>(allSteps));
  EXPECT_EQ(flags.failed.load(), 0u);
  EXPECT_TRUE(engine.failure().ok());
  expectNoMisuse(links.net.counters());
  if (GetParam().options.busyEvery > 0) {
    EXPECT_GT(links.net.counters().busyAnswers, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, ProxyOverFake,
                         ::testing::Values(FakeCase{"Prompt", {0, 0, kNetMaxRequests}, 1 << 30},
                                           FakeCase{"SlowAndBusy", {3, 3, kNetMaxRequests}, 1 << 30},
                                           FakeCase{"ThreeInFlightSlowConsumer", {1, 0, 3}, 1},
                                           FakeCase{"VeryBusySlowConsumer", {0, 2, kNetMaxRequests}, 2}),
                         fakeCaseName);

struct FaultCase {
  FakeNet::Call call;
  const char* what;  // the call the message names
  ncclResult_t code;
};

std::string faultName(const ::testing::TestParamInfo<FaultCase>& fault) {
  const char* names[] = {"Isend", "Irecv", "TestSend", "TestRecv"};
  return names[static_cast<int>(fault.param.call)];
}

void PrintTo(const FaultCase& fault, std::ostream* os) { *os << fault.what << " returns " << fault.code; }

class ProxyFailure : public ::testing::TestWithParam<FaultCase> {};

TEST_P(ProxyFailure, IsReturnedFlaggedAndNamesThePeerAndChannel) {
  FakeLinks links({1, 0, kNetMaxRequests});
  links.net.injectFault(GetParam().call, GetParam().code, 6);
  Flags flags;
  ProgressEngine engine(0, &flags.abort, &flags.failed);
  engine.post(&links.send, {1, 40});
  engine.post(&links.recv, {1, 40});
  Result<bool> moved = true;
  for (int pass = 0; pass < 10000 && moved.ok(); ++pass) {
    links.path.produce(40);
    moved = engine.progressOnce();
    links.path.consume();
  }
  ASSERT_FALSE(moved.ok()) << "the injected fault never surfaced";
  EXPECT_EQ(moved.status().code(), GetParam().code);
  EXPECT_EQ(flags.failed.load(), 1u);
  const Status failure = engine.failure();
  EXPECT_EQ(failure.code(), GetParam().code);
  const bool onSend = GetParam().call == FakeNet::Call::kIsend || GetParam().call == FakeNet::Call::kTestSend;
  const NetLink& culprit = onSend ? links.send : links.recv;
  EXPECT_NE(failure.message().find(culprit.peerName), std::string::npos) << failure.message();
  EXPECT_NE(failure.message().find("channel 5"), std::string::npos) << failure.message();
  EXPECT_NE(failure.message().find(GetParam().what), std::string::npos) << failure.message();
  // Sticky: later passes report it again and move nothing; waiting gives up at once.
  const int64_t posted = links.net.counters().sendsPosted + links.net.counters().recvsPosted;
  Result<bool> again = engine.progressOnce();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), GetParam().code);
  EXPECT_EQ(links.net.counters().sendsPosted + links.net.counters().recvsPosted, posted);
  EXPECT_FALSE(engine.idle());
  EXPECT_FALSE(engine.waitIdle(0));
  expectNoMisuse(links.net.counters());
}

INSTANTIATE_TEST_SUITE_P(Faults, ProxyFailure,
                         ::testing::Values(FaultCase{FakeNet::Call::kTestRecv, "test", ncclRemoteError},
                                           FaultCase{FakeNet::Call::kTestSend, "test", ncclRemoteError},
                                           FaultCase{FakeNet::Call::kIsend, "isend", ncclSystemError},
                                           FaultCase{FakeNet::Call::kIrecv, "irecv", ncclInternalError}),
                         faultName);

// A message that does not end in a call-signature trailer (a peer speaking
// another wire format) fails the receive, naming the peer and the channel,
// instead of publishing bytes whose call nobody can check.
TEST(ProxyTrailer, AMessageWithoutTheTrailerFailsTheReceive) {
  for (int64_t bytes : {int64_t{10}, int64_t{100}}) {
    FakeLinks links({0, 0, kNetMaxRequests});
    // A bare message, as an older sender would put it on the wire: 10 bytes
    // (shorter than a trailer), or 100 whose last 24 are not a trailer.
    std::memset(links.send.fifo.slots, 0x5a, static_cast<size_t>(bytes));
    const transport::NetApi* api = links.net.network().api.get();
    void* request = nullptr;
    ASSERT_EQ(
        api->isend(links.send.comm, links.send.fifo.slots, static_cast<size_t>(bytes), 0, links.send.mhandle, &request),
        ncclSuccess);
    ASSERT_NE(request, nullptr);
    int done = 0, size = 0;
    ASSERT_EQ(api->test(request, &done, &size), ncclSuccess);
    ASSERT_EQ(done, 1);
    Flags flags;
    ProgressEngine engine(0, &flags.abort, &flags.failed);
    engine.post(&links.recv, {1, 1});
    Result<bool> moved = true;
    for (int pass = 0; pass < 100 && moved.ok(); ++pass) moved = engine.progressOnce();
    ASSERT_FALSE(moved.ok()) << bytes << " bytes: the bare message was accepted";
    const std::string why = moved.status().message();
    EXPECT_NE(why.find("call-signature trailer"), std::string::npos) << why;
    EXPECT_NE(why.find(links.recv.peerName), std::string::npos) << why;
    EXPECT_NE(why.find("channel 5"), std::string::npos) << why;
    EXPECT_EQ(flags.failed.load(), 1u);
    EXPECT_EQ(device::loadAcquire(links.path.consumer.tail), 0u) << "nothing may be published";
  }
}

TEST(ProxyAbort, WithTheAbortFlagSetNothingMoves) {
  FakeLinks links({0, 0, kNetMaxRequests});
  Flags flags;
  ProgressEngine engine(0, &flags.abort, &flags.failed);
  engine.post(&links.send, {1, 8});
  engine.post(&links.recv, {1, 8});
  links.path.produce(8);
  flags.abort.store(1);
  for (int pass = 0; pass < 100; ++pass) {
    Result<bool> moved = engine.progressOnce();
    ASSERT_TRUE(moved.ok());
    EXPECT_FALSE(moved.value());
  }
  EXPECT_EQ(links.net.counters().sendsPosted, 0);
  EXPECT_EQ(links.net.counters().recvsPosted, 0);
  EXPECT_EQ(links.send.posted, 0u);
  EXPECT_FALSE(engine.idle());
  EXPECT_FALSE(engine.waitIdle(0));
  // Aborting is final in practice, but the flag alone is what stops progress.
  flags.abort.store(0);
  Result<bool> moved = engine.progressOnce();
  ASSERT_TRUE(moved.ok());
  EXPECT_TRUE(moved.value());
}

TEST(ProxyOps, ZeroStepOperationsAreNotWork) {
  FakeLinks links({0, 0, kNetMaxRequests});
  ProgressEngine engine(0, nullptr, nullptr);
  engine.post(&links.send, {1, 0});
  EXPECT_TRUE(engine.idle());
  Result<bool> moved = engine.progressOnce();
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(moved.value());
}

// The same round trip over the real socket network, each side with its own
// engine and the engines' threads doing the work while the test is the data
// path. Slots of 256 KiB: most steps travel in pieces over the data sockets.
TEST(ProxyOverSockets, RoundTripWithEngineThreads) {
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "2");
  constexpr int64_t kStepBytes = 256 * 1024;
  CommPair pair;
  ASSERT_NO_FATAL_FAILURE(connectPair(&pair));
  transport::Network net;
  net.api = transport::adaptNetTable(8, pair.api);
  net.devices = 1;
  DataPath path;
  path.stepBytes = kStepBytes;
  NetLink send;
  NetLink recv;
  ASSERT_NO_FATAL_FAILURE(setUpLink(&send, net, true, pair.send, &path.producer, kStepBytes));
  ASSERT_NO_FATAL_FAILURE(setUpLink(&recv, net, false, pair.recv, &path.consumer, kStepBytes));
  pair.send = pair.recv = nullptr;  // the links close them
  Flags senderFlags, receiverFlags;
  {
    ProgressEngine sender(0, &senderFlags.abort, &senderFlags.failed);
    ProgressEngine receiver(3, &receiverFlags.abort, &receiverFlags.failed);
    sender.start();
    receiver.start();
    const uint64_t ops[] = {50, 1, 29};
    for (uint64_t steps : ops) {
      sender.post(&send, {1, steps});
      receiver.post(&recv, {1, steps});
    }
    const Deadline deadline = Deadline::afterSec(20);
    while (path.consumer.step < 80) {
      ASSERT_FALSE(deadline.expired()) << "consumed " << path.consumer.step << " of 80; " << sender.failure().message()
                                       << receiver.failure().message();
      path.produce(80);
      ASSERT_NO_FATAL_FAILURE(path.consume());
    }
    EXPECT_TRUE(sender.waitIdle(10000000000));
    EXPECT_TRUE(receiver.waitIdle(10000000000));
    EXPECT_TRUE(sender.failure().ok()) << sender.failure().message();
    EXPECT_TRUE(receiver.failure().ok()) << receiver.failure().message();
  }  // the engines stop before the links close
  EXPECT_EQ(senderFlags.failed.load() + receiverFlags.failed.load(), 0u);
}

}  // namespace
}  // namespace weft::testing

// The tuning file (tuning/figures.h): parsing, every kind of bad line named
// by file and line, the round trip of what weft-tune writes, and figures
// that move the planner's choices the way the model says they should.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>

#include "core/planner.h"
#include "tuning/algo.h"
#include "tuning/figures.h"
#include "tuning/tuning.h"

namespace weft::tuning {
namespace {

const TuningFigures kDefaults = defaultFigures(true);

TuningFigures parseOk(const std::string& text) {
  auto f = parseTuningFile(text, "good.txt", kDefaults);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? f.value() : kDefaults;
}

// The error's message for `text`, which must fail with ncclInvalidArgument.
std::string errorOf(const std::string& text) {
  auto f = parseTuningFile(text, "bad.txt", kDefaults);
  EXPECT_FALSE(f.ok()) << text;
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), ncclInvalidArgument);
  return f.status().message();
}

TEST(TuningFile, GoodFileWithCommentsAndBlankLines) {
  const TuningFigures f = parseOk(
      "# measured by hand\n"
      "\n"
      "version 1   # the format\n"
      "threads.simple.latency_us 1.5\n"
      "  shm.ll.gbs   0.75  \n"
      "net.simple.gbs 2e0\n");
  EXPECT_DOUBLE_EQ(f.get(Figure::kThreadsSimpleLatUs), 1.5);
  EXPECT_DOUBLE_EQ(f.gbs(LinkType::kShm, 1), 0.75);
  EXPECT_DOUBLE_EQ(f.gbs(LinkType::kNet, 0), 2.0);
  EXPECT_TRUE(f.fromFile[static_cast<int>(Figure::kThreadsSimpleLatUs)]);
  // Figures the file leaves out keep the defaults, and say so.
  EXPECT_DOUBLE_EQ(f.get(Figure::kCopyGBs), kDefaults.get(Figure::kCopyGBs));
  EXPECT_FALSE(f.fromFile[static_cast<int>(Figure::kCopyGBs)]);
  EXPECT_EQ(f.source, "good.txt");
  EXPECT_NE(describeFigures(f).find("threads.simple.latency_us 1.5 (file)"), std::string::npos);
  EXPECT_NE(describeFigures(f).find("copy.gbs 8 (default)"), std::string::npos);
}

// LL128's figures: keys of their own, read by protocol 2, and built-in
// values that keep it behind Simple (more per hand-off, less per byte), as
// measured on the host.
TEST(TuningFile, LL128FiguresHaveTheirOwnKeys) {
  const TuningFigures f = parseOk(
      "version 1\n"
      "threads.ll128.latency_us 0.25\n"
      "shm.ll128.gbs 12\n");
  EXPECT_DOUBLE_EQ(f.latencyUs(LinkType::kThreads, 2), 0.25);
  EXPECT_DOUBLE_EQ(f.gbs(LinkType::kShm, 2), 12.0);
  EXPECT_DOUBLE_EQ(f.gbs(LinkType::kThreads, 2), kDefaults.gbs(LinkType::kThreads, 2));
  EXPECT_DOUBLE_EQ(f.latencyUs(LinkType::kThreads, 1), kDefaults.latencyUs(LinkType::kThreads, 1)) << "LL untouched";
  for (const TuningFigures& d : {defaultFigures(true), defaultFigures(false)})
    for (LinkType link : {LinkType::kThreads, LinkType::kShm}) {
      EXPECT_GE(d.latencyUs(link, 2), d.latencyUs(link, 0));
      EXPECT_LT(d.gbs(link, 2), d.gbs(link, 0));
    }
  const std::string written = formatTuningFile(f, "test");
  EXPECT_NE(written.find("threads.ll128.latency_us 0.25"), std::string::npos) << written;
  EXPECT_NE(written.find("shm.ll128.latency_us 0.6\n"), std::string::npos) << written;
}

// Direct mode's thresholds: one key per collective and link, the built-in
// values those measured on the host (docs/performance.md, "Direct mode's
// threshold"), 1e15 read as never, and written back as they were read.
TEST(TuningFile, DirectThresholdsHaveAKeyPerCollectiveAndLink) {
  EXPECT_EQ(kDefaults.directMinBytes(LinkType::kThreads, CollKind::kAllReduce), 16 << 10);
  EXPECT_EQ(kDefaults.directMinBytes(LinkType::kShm, CollKind::kAllReduce), 32 << 10);
  EXPECT_EQ(kDefaults.directMinBytes(LinkType::kThreads, CollKind::kReduceScatter), 16 << 10);
  EXPECT_EQ(kDefaults.directMinBytes(LinkType::kShm, CollKind::kReduceScatter), 64 << 10);
  for (LinkType link : {LinkType::kThreads, LinkType::kShm}) {
    EXPECT_EQ(kDefaults.directMinBytes(link, CollKind::kAllGather), 64 << 10);
    EXPECT_EQ(kDefaults.directMinBytes(link, CollKind::kBroadcast), 256 << 10);
    EXPECT_EQ(kDefaults.directMinBytes(link, CollKind::kReduce), std::numeric_limits<int64_t>::max());
  }
  const TuningFigures f = parseOk(
      "version 1\n"
      "shm.direct.reducescatter_min_bytes 131072\n"
      "threads.direct.broadcast_min_bytes 1e+15\n");
  EXPECT_EQ(f.directMinBytes(LinkType::kShm, CollKind::kReduceScatter), 128 << 10);
  EXPECT_EQ(f.directMinBytes(LinkType::kThreads, CollKind::kReduceScatter), 16 << 10) << "threads' untouched";
  EXPECT_EQ(f.directMinBytes(LinkType::kThreads, CollKind::kBroadcast), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(f.directMinBytes(LinkType::kShm, CollKind::kBroadcast), 256 << 10);
  const std::string written = formatTuningFile(f, "test");
  EXPECT_NE(written.find("shm.direct.reducescatter_min_bytes 131072\n"), std::string::npos) << written;
  EXPECT_NE(written.find("threads.direct.broadcast_min_bytes 1e+15\n"), std::string::npos) << written;
  EXPECT_NE(written.find("threads.direct.allreduce_min_bytes 16384\n"), std::string::npos) << written;
  const TuningFigures back = parseOk(written);
  for (int i = 0; i < kFigureCount; ++i) EXPECT_DOUBLE_EQ(back.value[i], f.value[i]) << kFigureKeys[i];
}

TEST(TuningFile, EveryBadLineNamesTheFileTheLineAndWhatWasExpected) {
  struct Case {
    const char* text;
    const char* line;
    const char* expected;
  };
  const Case cases[] = {
      {"threads.simple.gbs 4\n", "line 1", "expected the version line \"version 1\" first"},
      {"version 2\n", "line 1", "expected version 1"},
      {"# c\nversion 1\nthreads.simple.gbz 4\n", "line 3", "unknown key \"threads.simple.gbz\": expected one of"},
      {"version 1\ncopy.gbs 4\ncopy.gbs 5\n", "line 3", "expected each key once"},
      {"version 1\ncopy.gbs fast\n", "line 2", "expected a positive number"},
      {"version 1\ncopy.gbs -3\n", "line 2", "expected a positive number"},
      {"version 1\ncopy.gbs 0\n", "line 2", "expected a positive number"},
      {"version 1\ncopy.gbs 4GB\n", "line 2", "expected a positive number"},
      {"version 1\ncopy.gbs nan\n", "line 2", "expected a positive number"},
      {"version 1\ncopy.gbs\n", "line 2", "expected one key and one value"},
      {"version 1\ncopy.gbs 4 5\n", "line 2", "expected one key and one value"},
      {"version 1\noversubscribed.latency_factor 0.5\n", "line 2", "expected a number of at least 1"},
  };
  for (const Case& c : cases) {
    const std::string message = errorOf(c.text);
    EXPECT_NE(message.find("bad.txt: "), std::string::npos) << message;
    EXPECT_NE(message.find(c.line), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  // No version line at all: the file is named and the version expected.
  for (const char* text : {"", "# only a comment\n\n"}) {
    const std::string message = errorOf(text);
    EXPECT_NE(message.find("bad.txt: no version line: expected \"version 1\""), std::string::npos) << message;
  }
}

TEST(TuningFile, MissingFileIsAnErrorNamingIt) {
  auto f = readTuningFile("/nonexistent/weft-tuning.txt", kDefaults);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ncclInvalidArgument);
  EXPECT_NE(f.status().message().find("WEFT_TUNING_FILE=/nonexistent/weft-tuning.txt: cannot be read"),
            std::string::npos)
      << f.status().message();
}

TEST(TuningFile, WrittenFileReadsBackTheSameFigures) {
  TuningFigures measured = kDefaults;
  for (int i = 0; i < kFigureCount; ++i) {
    measured.value[i] = 1.0 + i * 0.123456;  // every figure differs from its default
    measured.fromFile[i] = i % 2 == 0;
  }
  const std::string text = formatTuningFile(measured, "a header\nof two lines");
  EXPECT_EQ(text.rfind("# a header\n# of two lines\nversion 1\n", 0), 0u) << text;
  const std::string path = ::testing::TempDir() + "weft_figures_roundtrip.txt";
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs(text.c_str(), file);
  std::fclose(file);
  auto back = readTuningFile(path, kDefaults);
  std::remove(path.c_str());
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (int i = 0; i < kFigureCount; ++i) {
    EXPECT_NEAR(back.value().value[i], measured.value[i], 1e-5 * measured.value[i]) << kFigureKeys[i];
    EXPECT_TRUE(back.value().fromFile[i]) << kFigureKeys[i];  // every figure is written
  }
}

// The default figures are the planner's built-in ones.
TEST(TuningFile, DefaultsAreTheHostFigures) {
  const LinkFigures l = modelLinks(kDefaults, LinkType::kShm, 0, false);
  EXPECT_DOUBLE_EQ(l.intraLatUs, 0.5);
  EXPECT_DOUBLE_EQ(l.interLatUs, 20.0);
  EXPECT_DOUBLE_EQ(modelLinks(kDefaults, LinkType::kShm, 0, true).intraLatUs, 2.0);
  EXPECT_EQ(kDefaults.bytesPerChannel(), kBytesPerChannel);
}

// A machine whose hand-offs are slow: 8 ranks of one node pick the
// butterfly's 3 rounds over halving-doubling's 6 at 64 KiB, and 4 ranks keep
// one-shot's single hand-off to a larger size.
TEST(TuningFile, SlowHandOffsMoveSmallAllReduceToFewerRounds) {
  const TuningFigures slow = parseOk("version 1\nshm.simple.latency_us 200\n");
  const AlgoFilter all;
  const Shape eight{8, 1, 8, 0};
  const Choice fast = chooseAlgorithm(CollKind::kAllReduce, 64 << 10, eight,
                                      modelLinks(kDefaults, LinkType::kShm, 0, false), all, false, false, true);
  const Choice slowed = chooseAlgorithm(CollKind::kAllReduce, 64 << 10, eight,
                                        modelLinks(slow, LinkType::kShm, 0, false), all, false, false, true);
  EXPECT_EQ(fast.algo, Algorithm::kHalvingDoubling) << describeEstimates(fast);
  EXPECT_EQ(slowed.algo, Algorithm::kButterfly) << describeEstimates(slowed);
  // The figures of the other link type do not matter here.
  const Choice threads = chooseAlgorithm(CollKind::kAllReduce, 64 << 10, eight,
                                         modelLinks(slow, LinkType::kThreads, 0, false), all, false, false, true);
  EXPECT_EQ(threads.algo, Algorithm::kHalvingDoubling) << describeEstimates(threads);
}

// A channel whose start-up is long needs more bytes before it pays.
TEST(TuningFile, ChannelStartUpSetsBytesPerChannel) {
  const TuningFigures slow = parseOk("version 1\nchannel.startup_us 100\ncopy.gbs 10\n");
  EXPECT_EQ(slow.bytesPerChannel(), 1000000);
  EXPECT_EQ(collChannels(4 << 20, {1, 4}, kDefaults.bytesPerChannel()), 4);
  EXPECT_EQ(collChannels(4 << 20, {1, 4}, parseOk("version 1\nchannel.startup_us 2000\n").bytesPerChannel()), 1);
}

}  // namespace
}  // namespace weft::tuning

namespace weft::core {
namespace {

device::CollWork planAllReduce(const tuning::TuningFigures* figures, size_t count) {
  static float buffer[1 << 12];
  PlanInputs in{0, 2, 1, 1, 8192, 4};
  in.shape = tuning::Shape{2, 1, 2, 0};
  in.llPossible = true;
  in.llByDefault = true;
  in.figures = figures;
  in.intraLink = tuning::LinkType::kThreads;
  CollTask task{};
  task.func = device::Func::kAllReduce;
  task.sendbuff = buffer;
  task.recvbuff = buffer;
  task.count = count;
  task.dtype = ncclFloat32;
  task.op.kind = device::RedOpKind::kSum;
  Plan plan;
  EXPECT_TRUE(planTasks(in, {task}, {}, &plan).ok());
  return plan.channels[0][0].coll;
}

// The protocol comes from the model: with the defaults 4 KiB runs Simple;
// a machine whose LL moves bytes as fast as Simple and hands off faster
// runs it under LL, and one whose LL hands off slower never does.
TEST(TuningFile, ProtocolFollowsTheFigures) {
  const tuning::TuningFigures defaults = tuning::defaultFigures(true);
  EXPECT_EQ(planAllReduce(&defaults, 2).proto, device::Proto::kLL);
  EXPECT_EQ(planAllReduce(&defaults, 1024).proto, device::Proto::kSimple);
  auto fastLL = tuning::parseTuningFile("version 1\nthreads.ll.latency_us 0.1\nthreads.ll.gbs 8\n", "f", defaults);
  ASSERT_TRUE(fastLL.ok());
  EXPECT_EQ(planAllReduce(&fastLL.value(), 1024).proto, device::Proto::kLL);
  auto slowLL = tuning::parseTuningFile("version 1\nthreads.ll.latency_us 5\n", "f", defaults);
  ASSERT_TRUE(slowLL.ok());
  EXPECT_EQ(planAllReduce(&slowLL.value(), 2).proto, device::Proto::kSimple);
}

}  // namespace
}  // namespace weft::core

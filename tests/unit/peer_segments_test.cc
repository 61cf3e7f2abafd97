// PeerSegments (common/shared_mem.h): the mappings one process keeps of
// other processes' ncclMemAlloc segments (direct writes into their outputs,
// direct reads of their inputs). A segment is mapped once and its data is
// the owner's; from kSweepAt mappings on, a new mapping first unmaps those
// whose owner, still alive, freed them, and keeps those of an owner that
// died (another channel may still be reading or writing through them in a
// call that is failing because of that death).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/shared_mem.h"

namespace weft {
namespace {

constexpr size_t kBytes = 4096;

// A child process owning `count` segments, segment i filled with i + 1. On
// 'f' it frees the first `freeCount` of them and answers; on 'q' (or EOF) it
// exits.
class Owner {
 public:
  Owner(int count, int freeCount) {
    int down[2], up[2];
    EXPECT_EQ(pipe(down), 0);
    EXPECT_EQ(pipe(up), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(down[1]);
      close(up[0]);
      serve(count, freeCount, down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    toChild_ = down[1];
    fromChild_ = up[0];
    for (int i = 0; i < count; ++i) {
      SharedSpan span;
      EXPECT_EQ(read(fromChild_, &span, sizeof(span)), static_cast<ssize_t>(sizeof(span))) << "segment " << i;
      spans.push_back(span);
    }
  }
  ~Owner() {
    if (pid_ > 0) kill();
    close(toChild_);
    close(fromChild_);
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

  void freeSome() {
    ASSERT_EQ(write(toChild_, "f", 1), 1);
    char ack = 0;
    ASSERT_EQ(read(fromChild_, &ack, 1), 1);
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  pid_t pid() const { return pid_; }

  std::vector<SharedSpan> spans;

 private:
  [[noreturn]] static void serve(int count, int freeCount, int in, int out) {
    std::vector<void*> bases;
    for (int i = 0; i < count; ++i) {
      Result<void*> r = sharedAlloc(kBytes);
      SharedSpan span;
      if (!r.ok() || !sharedFind(r.value(), kBytes, &span)) _exit(2);
      std::memset(r.value(), i + 1, kBytes);
      bases.push_back(r.value());
      if (write(out, &span, sizeof(span)) != static_cast<ssize_t>(sizeof(span))) _exit(3);
    }
    char c = 0;
    while (read(in, &c, 1) == 1 && c != 'q') {
      if (c != 'f') continue;
      for (int i = 0; i < freeCount; ++i) sharedFree(bases[static_cast<size_t>(i)]);
      if (write(out, "k", 1) != 1) _exit(4);
    }
    _exit(0);
  }

  pid_t pid_ = -1;
  int toChild_ = -1;
  int fromChild_ = -1;
};

char* mapOne(PeerSegments* segments, const SharedSpan& span) {
  std::string why;
  bool gone = false;
  char* base = segments->map(span, &why, &gone);
  EXPECT_NE(base, nullptr) << why;
  EXPECT_FALSE(gone);
  return base;
}

TEST(PeerSegments, MapsOnceAndSeesTheOwnersData) {
  Owner owner(3, 0);
  PeerSegments segments;
  std::vector<char*> bases;
  for (const SharedSpan& s : owner.spans) bases.push_back(mapOne(&segments, s));
  for (size_t i = 0; i < bases.size(); ++i) {
    ASSERT_NE(bases[i], nullptr);
    EXPECT_EQ(bases[i][0], static_cast<char>(i + 1));
    EXPECT_EQ(bases[i][kBytes - 1], static_cast<char>(i + 1));
    EXPECT_EQ(mapOne(&segments, owner.spans[i]), bases[i]) << "mapped twice";
  }
  EXPECT_EQ(segments.mapped(), 3u);
}

// The process id a segment names is its owner's own, also in a child forked
// after the parent cached its id (thisProcessId): a peer opens the segment
// through /proc/<pid>/fd, so a stale id would open another process's file.
TEST(PeerSegments, AForkedOwnerNamesItsOwnProcess) {
  const pid_t parent = thisProcessId();
  ASSERT_EQ(parent, getpid());
  Owner owner(1, 0);
  ASSERT_EQ(owner.spans.size(), 1u);
  EXPECT_EQ(owner.spans[0].pid, owner.pid());
  EXPECT_NE(owner.spans[0].pid, parent);
  PeerSegments segments;
  char* base = mapOne(&segments, owner.spans[0]);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(base[0], 1);
  EXPECT_EQ(thisProcessId(), getpid());
}

// A living owner frees half its segments: the next mapping past kSweepAt
// unmaps exactly those.
TEST(PeerSegments, SweepUnmapsWhatALivingOwnerFreed) {
  const int n = static_cast<int>(PeerSegments::kSweepAt);
  Owner owner(n + 1, n / 2);
  PeerSegments segments;
  for (int i = 0; i < n; ++i) mapOne(&segments, owner.spans[static_cast<size_t>(i)]);
  ASSERT_EQ(segments.mapped(), static_cast<size_t>(n));
  owner.freeSome();
  char* last = mapOne(&segments, owner.spans[static_cast<size_t>(n)]);
  EXPECT_EQ(segments.mapped(), static_cast<size_t>(n - n / 2 + 1));
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last[0], static_cast<char>(n + 1));
  // A freed segment is gone for good: its fd names nothing (or another file).
  std::string why;
  bool gone = false;
  EXPECT_EQ(segments.map(owner.spans[0], &why, &gone), nullptr);
  EXPECT_TRUE(gone) << why;
}

// An owner that died: its mappings survive the sweep, and their pages still
// hold what it wrote (a call failing on its death may still use them).
TEST(PeerSegments, SweepKeepsADeadOwnersSegments) {
  const int n = static_cast<int>(PeerSegments::kSweepAt);
  Owner dead(n, 0);
  Owner alive(1, 0);
  PeerSegments segments;
  std::vector<char*> bases;
  for (const SharedSpan& s : dead.spans) bases.push_back(mapOne(&segments, s));
  dead.kill();
  mapOne(&segments, alive.spans[0]);  // past kSweepAt: sweeps
  EXPECT_EQ(segments.mapped(), static_cast<size_t>(n + 1));
  for (size_t i = 0; i < bases.size(); ++i) {
    ASSERT_NE(bases[i], nullptr);
    EXPECT_EQ(bases[i][kBytes / 2], static_cast<char>(i + 1)) << "segment " << i;
  }
}

}  // namespace
}  // namespace weft

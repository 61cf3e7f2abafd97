// The machine's hand-off limit: two threads on two cores pass one cache
// line back and forth (each waits for the other's value, then writes its
// own). Half a round trip is the least time in which one core can see what
// another wrote, so no hand-off between ranks (a FIFO step, an LL line) can
// be faster; an 8-byte allreduce of 2 ranks needs at least one.
// Prints the median over `runs` runs of `iters` round trips each.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

struct alignas(128) Line {
  std::atomic<uint64_t> value{0};
};

void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: unpinned still measures
}

// One run: the average round trip in ns.
double run(int iters, int cpuA, int cpuB) {
  Line line;
  std::thread partner([&] {
    pinTo(cpuB);
    for (uint64_t i = 0; i < static_cast<uint64_t>(iters); ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  pinTo(cpuA);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < static_cast<uint64_t>(iters); ++i) {
    line.value.store(2 * i + 1, std::memory_order_release);
    while (line.value.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  partner.join();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 200000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 11;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int cpuB = cores > 1 ? 1 : 0;
  std::vector<double> rtt;
  for (int r = 0; r < runs; ++r) rtt.push_back(run(iters, 0, cpuB));
  std::sort(rtt.begin(), rtt.end());
  const double median = rtt[rtt.size() / 2];
  std::printf("# cache-line ping-pong, cpus 0 and %d, %d runs of %d round trips\n", cpuB, runs, iters);
  std::printf("round trip median %.1f ns (min %.1f, max %.1f); hand-off (half) %.1f ns\n", median, rtt.front(),
              rtt.back(), median / 2);
  return 0;
}

// The machine's hand-off limit: two threads on two cores pass one cache
// line back and forth (each waits for the other's value, then writes its
// own). Half a round trip is the least time in which one core can see what
// another wrote, so no hand-off between ranks (a FIFO step, an LL line) can
// be faster; an 8-byte allreduce of 2 ranks needs at least one.
// Prints the median over `runs` runs of `iters` round trips each.
//
// Second figure, the exchange: both threads at once write an 8-byte value
// with its step into the other's line and wait for the other's (what a
// 2-rank 8 B allreduce does at the least), over 8 rotating lines whose
// consumer releases each step on a head counter the producer reads when it
// runs out of free lines (the flow control every bounded FIFO needs). Its
// time per step, the slower thread's, is the floor of that pattern on this
// machine; the difference to a library's 8 B allreduce is the call's own
// cost and its protocol's.
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

constexpr uint64_t kExchangeLines = 8;
struct ExchangeRegion {  // what one thread receives into
  Line slot[kExchangeLines];
  Line head;  // steps this region's consumer has read
};

// One run: the slower thread's average time per exchange, ns.
double exchange(int iters, int cpuA, int cpuB) {
  ExchangeRegion regions[2];
  double perStep[2] = {0, 0};
  auto body = [&](int me, int cpu) {
    pinTo(cpu);
    ExchangeRegion& in = regions[me];
    ExchangeRegion& out = regions[1 - me];
    uint64_t seen = 0;  // out.head as last read
    uint64_t sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t step = 1; step <= static_cast<uint64_t>(iters); ++step) {
      while (seen + kExchangeLines < step) seen = out.head.value.load(std::memory_order_acquire);
      const uint64_t payload = static_cast<uint64_t>(me) + 1;  // 32 bits of data, 32 of step
      out.slot[step % kExchangeLines].value.store(payload | (step << 32), std::memory_order_relaxed);
      uint64_t v = 0;
      while (((v = in.slot[step % kExchangeLines].value.load(std::memory_order_relaxed)) >> 32) != step) {
      }
      sum += v & 0xffffffffu;
      in.head.value.store(step, std::memory_order_release);
    }
    const auto t1 = std::chrono::steady_clock::now();
    perStep[me] = std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
    // Each thread received the other's payload (2 - me) at every step.
    if (sum != (2 - static_cast<uint64_t>(me)) * static_cast<uint64_t>(iters)) std::abort();
  };
  std::thread partner(body, 1, cpuB);
  body(0, cpuA);
  partner.join();
  return std::max(perStep[0], perStep[1]);
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
  std::vector<double> ex;
  for (int r = 0; r < runs; ++r) ex.push_back(exchange(iters, 0, cpuB));
  std::sort(ex.begin(), ex.end());
  std::printf(
      "exchange, both ways at once over 8 lines with a released head: median %.1f ns a step (min %.1f, "
      "max %.1f), %.2fx the hand-off\n",
      ex[ex.size() / 2], ex.front(), ex.back(), ex[ex.size() / 2] / (median / 2));
  return 0;
}

// The machine's memcpy bandwidth, measured like weft-demo measures
// allreduce: the same sizes, the median time of repeated calls on buffers
// touched beforehand. A copy reads and writes each byte once; the table
// prints bytes copied per second.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const size_t sizes[] = {8, 4096, size_t{1} << 20, size_t{64} << 20};
  std::printf("# memcpy, median of %d iterations\n%12s %12s %12s\n", iters, "bytes", "time(us)", "GB/s");
  for (size_t bytes : sizes) {
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    std::vector<double> samples;
    for (int it = 0; it < iters + 3; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      auto t1 = std::chrono::steady_clock::now();
      asm volatile("" : : "r"(dst.data()) : "memory");  // keep the copy
      if (it >= 3) samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(samples.begin(), samples.end());
    const double us = samples[samples.size() / 2];
    std::printf("%12zu %12.3f %12.3f\n", bytes, us, static_cast<double>(bytes) / (us * 1e3));
  }
  return 0;
}

// Several ranks on one GPU: allreduce bus bandwidth next to the GPU's own
// device-to-device copy bandwidth (the limit: every byte a ring moves is a
// device-to-device copy through the FIFO). Threads, one rank each, each with
// its own stream. A benchmark, not a test.
//
//   gpu_ranks_bench [nranks=4] [iters=20]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GB/s of cudaMemcpyAsync device to device, counting bytes read plus written
// once each, as busbw counts every byte a rank sends and receives.
double copyBandwidth(size_t bytes, int iters) {
  void *a, *b;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  std::vector<double> samples;
  for (int i = 0; i < iters + 2; ++i) {
    cudaEventRecord(t0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    if (i >= 2) samples.push_back(bytes / (ms * 1e6));
  }
  cudaFree(a);
  cudaFree(b);
  return medianOf(samples);
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<size_t> sizes = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  std::vector<std::vector<double>> times(sizes.size());  // rank 0's median us per size
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, nranks, id, r) != ncclSuccess) {
        std::fprintf(stderr, "init failed: %s\n", ncclGetLastError(nullptr));
        std::exit(1);
      }
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      void* buf;
      cudaMalloc(&buf, sizes.back());
      for (size_t s = 0; s < sizes.size(); ++s) {
        std::vector<double> samples;
        for (int i = 0; i < iters + 3; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          ncclAllReduce(buf, buf, sizes[s] / sizeof(float), ncclFloat, ncclSum, comm, stream);
          cudaStreamSynchronize(stream);
          auto t1 = std::chrono::steady_clock::now();
          if (i >= 3) samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        if (r == 0) times[s].push_back(medianOf(samples));
      }
      cudaFree(buf);
      cudaStreamDestroy(stream);
      ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# %d ranks on one %s, allreduce float sum in place, median of %d (each timed to stream sync)\n", nranks,
              prop.name, iters);
  std::printf("%12s %12s %12s %14s %10s\n", "bytes", "time(us)", "busbw(GB/s)", "d2d copy(GB/s)", "fraction");
  for (size_t s = 0; s < sizes.size(); ++s) {
    const double us = times[s][0];
    const double busbw = sizes[s] / (us * 1e3) * 2.0 * (nranks - 1) / nranks;
    const double copy = copyBandwidth(sizes[s], iters);
    std::printf("%12zu %12.2f %12.2f %14.2f %10.2f\n", sizes[s], us, busbw, copy, busbw / copy);
  }
  return 0;
}

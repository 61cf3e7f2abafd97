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

// GB/s of cudaMemcpyAsync device to device, the bytes copied over the time
// (as nccl-tests' busbw, which is set against a link's one-way bandwidth).
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

[[noreturn]] void fail(int rank, const char* what, const char* why) {
  std::fprintf(stderr, "gpu_ranks_bench: rank %d: %s failed: %s\n", rank, what, why);
  std::exit(1);
}

void checkCuda(int rank, cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail(rank, what, cudaGetErrorString(err));
}

void checkNccl(int rank, ncclComm_t comm, ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) fail(rank, what, ncclGetLastError(comm));
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_ranks_bench: no usable CUDA device\n");
    return 2;
  }
  if (nranks < 1 || iters < 1) {
    std::fprintf(stderr, "usage: gpu_ranks_bench [nranks >= 1] [iters >= 1]\n");
    return 2;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<size_t> sizes = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  std::vector<std::vector<double>> times(sizes.size());  // rank 0's median us per size
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      checkCuda(r, cudaSetDevice(0), "cudaSetDevice");
      ncclComm_t comm;
      checkNccl(r, nullptr, ncclCommInitRank(&comm, nranks, id, r), "ncclCommInitRank");
      cudaStream_t stream;
      checkCuda(r, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      // Out of place: every rank sends r + 1 in each element, so every
      // output element must be the sum of 1..nranks (exact in float).
      const size_t most = sizes.back() / sizeof(float);
      float* send = nullptr;
      float* recv = nullptr;
      checkCuda(r, cudaMalloc(&send, most * sizeof(float)), "cudaMalloc");
      checkCuda(r, cudaMalloc(&recv, most * sizeof(float)), "cudaMalloc");
      std::vector<float> host(most, static_cast<float>(r + 1));
      checkCuda(r, cudaMemcpy(send, host.data(), most * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
      const float want = static_cast<float>(nranks) * (nranks + 1) / 2;
      for (size_t s = 0; s < sizes.size(); ++s) {
        const size_t count = sizes[s] / sizeof(float);
        checkCuda(r, cudaMemset(recv, 0, count * sizeof(float)), "cudaMemset");
        std::vector<double> samples;
        for (int i = 0; i < iters + 3; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          checkNccl(r, comm, ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream), "ncclAllReduce");
          checkCuda(r, cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          auto t1 = std::chrono::steady_clock::now();
          if (i >= 3) samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        checkCuda(r, cudaMemcpy(host.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (size_t e = 0; e < count; ++e)
          if (host[e] != want) {
            std::fprintf(stderr, "gpu_ranks_bench: rank %d: %zu bytes: element %zu is %g, expected %g\n", r,
                         sizes[s], e, host[e], want);
            std::exit(1);
          }
        if (r == 0) times[s].push_back(medianOf(samples));
      }
      cudaFree(send);
      cudaFree(recv);
      cudaStreamDestroy(stream);
      checkNccl(r, comm, ncclCommDestroy(comm), "ncclCommDestroy");
    });
  }
  for (auto& t : threads) t.join();
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# %d ranks on one %s, allreduce float sum out of place, median of %d (each timed to stream sync)\n", nranks,
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

// Gloo side of bench/compare: TCP on loopback, ranks from RANK/WORLD_SIZE,
// rendezvous through a FileStore directory (GLOO_STORE). Timing, sizes and
// checks as mpi_coll.c and weft-perf --median --sample K: samples of K calls
// back to back (K = 1: each call alone), each counted as its mean per call,
// the median of the samples on every rank, no barrier between calls, one
// checked call first; bench/compare combines the ranks' medians.
// Usage: RANK=r WORLD_SIZE=n GLOO_STORE=dir gloo_coll <coll> <sizes> <samples> <warmups> [<K,...>]
// (warm-up calls and K: per size, or one value for every size; K defaults to 1)
// Every rank prints one CSV line per size: gloo,coll,nranks,bytes,median_us,ok,rank
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<long> parseList(const std::string& text) {
  std::vector<long> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stol(item));
  return out;
}

float input(int rank, size_t i) { return static_cast<float>(1 + (rank * 3 + static_cast<int>(i % 5))); }

void sumFloats(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

struct Bench {
  std::shared_ptr<gloo::Context> ctx;
  std::string coll;
  int rank, nranks;
  size_t count;
  std::vector<float> send, recv, work;
  uint32_t tag = 0;

  void run() {
    if (coll == "allreduce") {
      gloo::AllreduceOptions opts(ctx);
      opts.setInput(send.data(), count);
      opts.setOutput(recv.data(), count);
      opts.setReduceFunction(gloo::AllreduceOptions::Func(&sumFloats));
      opts.setTag(tag++);
      gloo::allreduce(opts);
    } else if (coll == "allgather") {
      gloo::AllgatherOptions opts(ctx);
      opts.setInput(send.data(), count);
      opts.setOutput(recv.data(), count * static_cast<size_t>(nranks));
      opts.setTag(tag++);
      gloo::allgather(opts);
    } else if (coll == "reducescatter") {
      // An allreduce of the whole input, then this rank's slice. Gloo's own
      // ReduceScatterHalvingDoubling (Debian's libgloo) crashes or returns
      // wrong slices from 32 KiB at 4 ranks and at 64 MiB at 2 ranks.
      gloo::AllreduceOptions opts(ctx);
      opts.setInput(send.data(), send.size());
      opts.setOutput(work.data(), work.size());
      opts.setReduceFunction(gloo::AllreduceOptions::Func(&sumFloats));
      opts.setTag(tag++);
      gloo::allreduce(opts);
      std::copy(work.begin() + static_cast<long>(count) * rank, work.begin() + static_cast<long>(count) * (rank + 1),
                recv.begin());
    } else {
      // In place, like MPI_Bcast: the root's output buffer holds the data.
      gloo::BroadcastOptions opts(ctx);
      opts.setOutput(recv.data(), count);
      opts.setRoot(0);
      opts.setTag(tag++);
      gloo::broadcast(opts);
    }
  }

  bool check() const {
    for (size_t i = 0; i < count; ++i) {
      if (coll == "allreduce" || coll == "reducescatter") {
        const size_t j = coll == "allreduce" ? i : static_cast<size_t>(rank) * count + i;
        float want = 0;
        for (int r = 0; r < nranks; ++r) want += input(r, j);
        if (recv[i] != want) return false;
      } else if (coll == "allgather") {
        for (int r = 0; r < nranks; ++r)
          if (recv[static_cast<size_t>(r) * count + i] != input(r, i)) return false;
      } else if (recv[i] != input(0, i)) {
        return false;
      }
    }
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || !std::getenv("RANK") || !std::getenv("WORLD_SIZE") || !std::getenv("GLOO_STORE")) {
    std::fprintf(stderr,
                 "usage: RANK=r WORLD_SIZE=n GLOO_STORE=dir gloo_coll <coll> <sizes> <samples> <warmups> [<calls per "
                 "sample>]\n");
    return 2;
  }
  Bench b;
  b.coll = argv[1];
  b.rank = std::atoi(std::getenv("RANK"));
  b.nranks = std::atoi(std::getenv("WORLD_SIZE"));
  const std::vector<long> sizes = parseList(argv[2]), iters = parseList(argv[3]);
  const std::vector<long> warmups = parseList(argv[4]);  // per size, or one for all
  const std::vector<long> perSample = argc > 5 ? parseList(argv[5]) : std::vector<long>{1};  // the same
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(std::getenv("GLOO_STORE"));
  auto ctx = std::make_shared<gloo::rendezvous::Context>(b.rank, b.nranks);
  ctx->connectFullMesh(store, device);
  b.ctx = ctx;
  bool allOk = true;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const size_t elems = static_cast<size_t>(sizes[s]) / sizeof(float);
    const bool gathered = b.coll == "allgather", scattered = b.coll == "reducescatter";
    b.count = gathered || scattered ? elems / static_cast<size_t>(b.nranks) : elems;
    const size_t sendElems = scattered ? b.count * static_cast<size_t>(b.nranks) : b.count;
    const size_t recvElems = gathered ? b.count * static_cast<size_t>(b.nranks) : b.count;
    b.send.assign(std::max<size_t>(1, sendElems), 0);
    for (size_t i = 0; i < sendElems; ++i) b.send[i] = input(b.rank, i);
    b.recv.assign(std::max<size_t>(1, recvElems), 0);
    if (b.coll == "broadcast" && b.rank == 0) std::copy(b.send.begin(), b.send.begin() + sendElems, b.recv.begin());
    b.work.assign(std::max<size_t>(1, sendElems), 0);
    bool ok = true;
    if (b.count > 0) {
      b.run();
      ok = b.check();
    }
    allOk = allOk && ok;
    std::vector<double> samples;
    const long warmup = warmups.empty() ? 0 : warmups[warmups.size() > s ? s : 0];
    const long calls = std::max<long>(1, perSample.empty() ? 1 : perSample[perSample.size() > s ? s : 0]);
    for (long it = 0; b.count > 0 && it < warmup; ++it) b.run();
    for (long it = 0; it < iters[s]; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      for (long c = 0; b.count > 0 && c < calls; ++c) b.run();
      samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                        static_cast<double>(calls));
    }
    std::sort(samples.begin(), samples.end());
    std::printf("gloo,%s,%d,%zu,%.3f,%d,%d\n", b.coll.c_str(), b.nranks,
                b.count * (gathered || scattered ? static_cast<size_t>(b.nranks) : 1) * sizeof(float),
                samples[samples.size() / 2], ok ? 1 : 0, b.rank);
    std::fflush(stdout);
  }
  return allOk ? 0 : 1;
}

/* MPI side of bench/compare (built once with Open MPI's mpicc and once with
 * MPICH's). Times one collective per size exactly as weft-perf --median
 * --sample K does: samples of K calls back to back (K = 1: each call alone),
 * each counted as its mean per call, no barrier between calls, the median
 * of the samples on every rank, after warm-up and one checked call; bench/compare
 * combines the ranks' medians (the slowest rank's by default, as
 * weft-perf -a 3). Sizes follow nccl-tests: the buffer for allreduce and
 * broadcast, the gathered total for allgather, the scattered total for
 * reducescatter.
 * Usage: mpirun -np N mpi_coll <allreduce|allgather|reducescatter|broadcast>
 *        <size,size,...> <samples,samples,...> <warmup,warmup,...> [<K,K,...>]
 * (warm-up calls and K: per size, or one value for every size; K defaults to 1)
 * Prints one CSV line per size and rank, in rank order:
 * PEER,coll,nranks,bytes,median_us,ok,rank (PEER: -DPEER="name", default mpi) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PEER
#define PEER "mpi"
#endif

static int cmpDouble(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int parseList(const char* text, long* out, int max) {
  int n = 0;
  for (const char* p = text; *p && n < max; ++n) {
    out[n] = strtol(p, (char**)&p, 10);
    if (*p == ',') ++p;
  }
  return n;
}

static float input(int rank, size_t i) { return (float)(1 + (rank * 3 + (int)(i % 5))); }

/* One call. */
static void run(const char* coll, float* send, float* recv, size_t count, MPI_Comm world, int nranks) {
  if (!strcmp(coll, "allreduce")) {
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, world);
  } else if (!strcmp(coll, "allgather")) {
    MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, world);
  } else if (!strcmp(coll, "reducescatter")) {
    MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, world);
  } else {
    MPI_Bcast(send, (int)count, MPI_FLOAT, 0, world);
  }
  (void)nranks;
}

/* Checks the result of one call against the reference; 1 if right. */
static int check(const char* coll, const float* send, const float* recv, size_t count, int rank, int nranks) {
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    if (!strcmp(coll, "allreduce")) {
      for (int r = 0; r < nranks; ++r) want += input(r, i);
      if (recv[i] != want) return 0;
    } else if (!strcmp(coll, "reducescatter")) {
      for (int r = 0; r < nranks; ++r) want += input(r, (size_t)rank * count + i);
      if (recv[i] != want) return 0;
    } else if (!strcmp(coll, "allgather")) {
      for (int r = 0; r < nranks; ++r)
        if (recv[(size_t)r * count + i] != input(r, i)) return 0;
    } else if (send[i] != input(0, i)) {
      return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc < 5) {
    if (rank == 0) fprintf(stderr, "usage: mpi_coll <coll> <sizes> <samples> <warmups> [<calls per sample>]\n");
    MPI_Finalize();
    return 2;
  }
  const char* coll = argv[1];
  long sizes[64], iters[64];
  const int nsizes = parseList(argv[2], sizes, 64);
  parseList(argv[3], iters, 64);
  /* Warm-up calls per size, or one count for every size. */
  long warmups[64], perSample[64] = {1};
  const int nwarmups = parseList(argv[4], warmups, 64);
  const int nperSample = argc > 5 ? parseList(argv[5], perSample, 64) : 1;
  int allOk = 1;
  for (int s = 0; s < nsizes; ++s) {
    const int warmup = (int)warmups[nwarmups > s ? s : 0];
    const long k = perSample[nperSample > s ? s : 0];
    const int calls = k > 0 ? (int)k : 1;
    const size_t elems = (size_t)sizes[s] / sizeof(float);
    const int gathered = !strcmp(coll, "allgather"), scattered = !strcmp(coll, "reducescatter");
    const size_t count = gathered || scattered ? elems / (size_t)nranks : elems;
    const size_t sendElems = scattered ? count * (size_t)nranks : count;
    const size_t recvElems = gathered ? count * (size_t)nranks : count;
    float* send = malloc(sizeof(float) * (sendElems ? sendElems : 1));
    float* recv = malloc(sizeof(float) * (recvElems ? recvElems : 1));
    const int isBcast = !strcmp(coll, "broadcast");
    for (size_t i = 0; i < sendElems; ++i) send[i] = isBcast && rank != 0 ? 0.0f : input(rank, i);
    memset(recv, 0, sizeof(float) * recvElems); /* touched before timing */
    run(coll, send, recv, count, MPI_COMM_WORLD, nranks);
    int ok = check(coll, send, recv, count, rank, nranks), all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    allOk = allOk && all;
    const int n = (int)iters[s];
    double* samples = malloc(sizeof(double) * (size_t)n);
    for (int it = 0; it < warmup; ++it) run(coll, send, recv, count, MPI_COMM_WORLD, nranks);
    for (int it = 0; it < n; ++it) {
      const double t0 = MPI_Wtime();
      for (int c = 0; c < calls; ++c) run(coll, send, recv, count, MPI_COMM_WORLD, nranks);
      samples[it] = (MPI_Wtime() - t0) * 1e6 / calls;
    }
    qsort(samples, (size_t)n, sizeof(double), cmpDouble);
    /* Every rank's median reaches rank 0, which prints them in rank order. */
    double* medians = malloc(sizeof(double) * (size_t)nranks);
    MPI_Gather(&samples[n / 2], 1, MPI_DOUBLE, medians, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const size_t bytes = count * (gathered || scattered ? (size_t)nranks : 1) * sizeof(float);
    for (int r = 0; rank == 0 && r < nranks; ++r) printf("%s,%s,%d,%zu,%.3f,%d,%d\n", PEER, coll, nranks, bytes, medians[r], all, r);
    fflush(stdout);
    free(medians);
    free(samples);
    free(send);
    free(recv);
  }
  MPI_Finalize();
  return allOk ? 0 : 1;
}

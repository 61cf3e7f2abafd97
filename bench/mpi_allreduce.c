/* The Open MPI side of the host comparison: MPI_Allreduce of floats (sum),
 * timed exactly like weft-demo: rank 0's time per call, no barrier between
 * calls, median over the iterations, result checked against the reference.
 * Usage: mpirun -np N mpi_allreduce [-i iters] [-w warmup] [-e maxbytes] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int iters = 20, warmup = 5;
  size_t maxBytes = 64u << 20;
  MPI_Init(&argc, &argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-i")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) maxBytes = strtoull(argv[i + 1], NULL, 0);
  }
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const size_t sizes[] = {8, 4096, 1u << 20, 64u << 20};
  double* samples = malloc(sizeof(double) * (size_t)iters);
  int allOk = 1;
  if (rank == 0) printf("# Open MPI: MPI_Allreduce float sum, %d ranks, median of %d iterations\n%12s %12s %8s\n",
                        nranks, iters, "bytes", "time(us)", "check");
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && sizes[s] <= maxBytes; ++s) {
    const size_t count = sizes[s] / sizeof(float);
    float* send = malloc(sizes[s]);
    float* recv = malloc(sizes[s]);
    for (size_t i = 0; i < count; ++i) send[i] = (float)(rank + 1 + (int)(i % 7));
    for (int it = 0; it < warmup + iters; ++it) {
      double t0 = MPI_Wtime();
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t1 = MPI_Wtime();
      if (it >= warmup) samples[it - warmup] = (t1 - t0) * 1e6;
    }
    int ok = 1;
    const float base = (float)(nranks * (nranks + 1) / 2);
    for (size_t i = 0; i < count && ok; ++i) ok = recv[i] == base + (float)(nranks * (int)(i % 7));
    allOk = allOk && ok;
    qsort(samples, (size_t)iters, sizeof(double), cmpDouble);
    if (rank == 0) printf("%12zu %12.2f %8s\n", sizes[s], samples[iters / 2], ok ? "ok" : "WRONG");
    free(send);
    free(recv);
  }
  free(samples);
  MPI_Finalize();
  return allOk ? 0 : 1;
}

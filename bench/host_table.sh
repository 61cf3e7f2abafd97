#!/usr/bin/env bash
# The host-backend table of docs/performance.md: allreduce at 8 B, 4 KiB,
# 1 MiB and 64 MiB on 2 and 4 ranks (processes), Weft and Open MPI side by
# side in one run, and memcpy measured the same way. Each configuration runs
# RUNS times; the table gives the median of the per-run medians.
# Usage: bench/host_table.sh [build-dir]   (RUNS=5 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
collect() {  # name, command...: appends "bytes time" lines per run
  local name=$1; shift
  for ((r = 0; r < runs; r++)); do
    "$@" | awk '/^ *[0-9]/ {print $1, $2}' >>"$tmp/$name"
  done
}
export WEFT_BACKEND=host
for n in 2 4; do
  collect "weft$n" "$build/bin/weft-demo" -n "$n" -i 20 -w 5
  if [ -x "$build/bin/mpi_allreduce" ]; then
    collect "mpi$n" mpirun --allow-run-as-root --oversubscribe -np "$n" "$build/bin/mpi_allreduce" -i 20 -w 5
  fi
done
collect memcpy "$build/bin/memcpy_bw" 20
printf '| bytes | memcpy (us) | Weft 2 ranks (us) | Open MPI 2 ranks (us) | Weft 4 ranks (us) | Open MPI 4 ranks (us) |\n'
printf '|---:|---:|---:|---:|---:|---:|\n'
for b in 8 4096 1048576 67108864; do
  row="| $b"
  for name in memcpy weft2 mpi2 weft4 mpi4; do
    if [ -f "$tmp/$name" ]; then
      row+=" | $(awk -v b="$b" '$1 == b {print $2}' "$tmp/$name" | median)"
    else
      row+=" | n/a"
    fi
  done
  echo "$row |"
done
echo "($runs runs each; $(nproc) cores; $(date -u +%F))"

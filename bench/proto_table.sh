#!/usr/bin/env bash
# Protocol and direct-mode figures of docs/performance.md, measured side by
# side in one run: 8 B AllReduce latency under Simple and LL (2 and 4 ranks,
# threads and processes), 64 MiB AllReduce bus bandwidth with and without
# direct mode (ranks as threads) against memcpy bandwidth, and the cache-line
# ping-pong, and 64 MiB AllReduce between 2 PROCESSES: FIFO (WEFT_DIRECT=0),
# direct into ncclMemAlloc buffers (mapped segments, -R 1: registered), and
# direct into private buffers by cross-memory attach (WEFT_CMA=1) or the FIFO
# (WEFT_CMA=0). Each configuration runs RUNS times (default 5), the runs
# interleaved; the table gives the median of the per-run figures. Times are
# the slowest rank's (weft-perf -a 3), each run the median of its iterations.
# Usage: bench/proto_table.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WEFT_BACKEND=host
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
perf() {  # name, column (6: time us, 8: busbw), env..., -- weft-perf args
  local name=$1 col=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$build/bin/weft-perf" allreduce -a 3 --median -c 0 "$@" |
    awk -v c="$col" '/^ *[0-9]/ {print $c; exit}' >>"$tmp/$name"
}
for ((r = 0; r < runs; r++)); do
  for n in 2 4; do
    for mode in threads procs; do
      launch=(-np "$n"); [ "$mode" = threads ] && launch+=(--threads)
      for proto in Simple LL; do
        perf "lat-$proto-$mode-$n" 6 NCCL_PROTO=$proto -- -b 8 -e 8 -n 2000 -w 200 "${launch[@]}"
      done
    done
  done
  for direct in 0 1; do
    perf "bw-direct$direct" 8 WEFT_DIRECT=$direct -- -b 64M -e 64M -n 10 -w 2 -np 2 --threads
  done
  big=(-b 64M -e 64M -n 10 -w 2 -np 2)
  perf bw-procs-fifo 8 WEFT_DIRECT=0 -- "${big[@]}"
  perf bw-procs-mapped 8 WEFT_DIRECT=1 -- "${big[@]}" -R 1
  perf bw-procs-cma 8 WEFT_DIRECT=1 WEFT_CMA=1 -- "${big[@]}" --private-buffers
  perf bw-procs-private 8 WEFT_DIRECT=1 WEFT_CMA=0 -- "${big[@]}" --private-buffers
  "$build/bin/memcpy_bw" 10 | awk '$1 == 67108864 {print $3}' >>"$tmp/memcpy"
  "$build/bin/pingpong" 100000 5 | awk '/hand-off \(half\)/ {print $(NF-1)}' >>"$tmp/handoff"
done
handoff=$(median <"$tmp/handoff")
echo "cache-line hand-off (half ping-pong round trip): $handoff ns"
printf '\n| 8 B AllReduce, slowest rank (us) | Simple | LL | LL / hand-off |\n|---|---:|---:|---:|\n'
for n in 2 4; do
  for mode in threads procs; do
    s=$(median <"$tmp/lat-Simple-$mode-$n"); l=$(median <"$tmp/lat-LL-$mode-$n")
    printf '| %d ranks, %s | %s | %s | %.1fx |\n' "$n" "$mode" "$s" "$l" "$(echo "$l * 1000 / $handoff" | bc -l)"
  done
done
m=$(median <"$tmp/memcpy"); d0=$(median <"$tmp/bw-direct0"); d1=$(median <"$tmp/bw-direct1")
printf '\n| 64 MiB AllReduce, 2 ranks (threads) | bus GB/s | / memcpy |\n|---|---:|---:|\n'
printf '| memcpy | %s | 1.00 |\n' "$m"
printf '| FIFO (WEFT_DIRECT=0) | %s | %.2f |\n' "$d0" "$(echo "$d0 / $m" | bc -l)"
printf '| direct (WEFT_DIRECT=1) | %s | %.2f |\n' "$d1" "$(echo "$d1 / $m" | bc -l)"
pf=$(median <"$tmp/bw-procs-fifo"); pm=$(median <"$tmp/bw-procs-mapped")
pc=$(median <"$tmp/bw-procs-cma"); pp=$(median <"$tmp/bw-procs-private")
printf '\n| 64 MiB AllReduce, 2 ranks (processes) | bus GB/s | / memcpy |\n|---|---:|---:|\n'
printf '| FIFO (WEFT_DIRECT=0, ncclMemAlloc buffers) | %s | %.2f |\n' "$pf" "$(echo "$pf / $m" | bc -l)"
printf '| direct, mapped segments (ncclMemAlloc, -R 1) | %s | %.2f |\n' "$pm" "$(echo "$pm / $m" | bc -l)"
printf '| direct, cross-memory attach (private buffers, WEFT_CMA=1) | %s | %.2f |\n' "$pc" "$(echo "$pc / $m" | bc -l)"
printf '| private buffers, WEFT_CMA=0 (FIFO) | %s | %.2f |\n' "$pp" "$(echo "$pp / $m" | bc -l)"

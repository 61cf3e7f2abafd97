#!/usr/bin/env bash
# AllReduce time per algorithm for docs/performance.md (a benchmark, never a
# test): each algorithm forced with NCCL_ALGO, and the cost model's own
# choice (NCCL_ALGO unset), on 2, 4 and 8 ranks as processes of this host
# (host backend, shared memory), out-of-place times in microseconds.
# Rounds are interleaved (RUNS, default 3); the table gives the median of the
# per-round medians. One-shot exists only up to 4 ranks and 256 KiB ("-").
#   Usage: bench/algo_table.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WEFT_BACKEND=host
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
perf() {  # name, weft-perf args...: appends "bytes time(us)" (out-of-place)
  local name=$1; shift
  "$build/bin/weft-perf" "$@" --median | awk '/^ *[0-9]/ {print $1, $6}' >>"$tmp/$name"
}
value() { [ -f "$tmp/$1" ] && awk -v b="$2" '$1 == b {print $2}' "$tmp/$1" | median || echo "-"; }

algos="Ring Tree OneShot Butterfly HalvingDoubling"
sizes="8 512 4096 32768 262144 2097152"
for ((r = 0; r < runs; r++)); do
  for n in 2 4 8; do
    for algo in $algos; do
      [ "$algo" = OneShot ] && [ "$n" -gt 4 ] && continue
      hi=2M; [ "$algo" = OneShot ] && hi=256K
      NCCL_ALGO=allreduce:$algo perf "$algo$n" allreduce -np "$n" -b 8 -e $hi -f 8 -n 50 -w 10
    done
    perf "model$n" allreduce -np "$n" -b 8 -e 2M -f 8 -n 50 -w 10
  done
done
for n in 2 4 8; do
  echo
  echo "#### AllReduce, $n ranks (us)"
  echo
  echo "| bytes | Ring | Tree | OneShot | Butterfly | HalvingDoubling | model's choice | fastest |"
  echo "|---:|---:|---:|---:|---:|---:|---:|:--|"
  for b in $sizes; do
    row="| $b"
    best=-; bestv=1e30
    for algo in $algos; do
      v=$(value "$algo$n" "$b")
      row+=" | $v"
      if [ "$v" != - ] && awk -v a="$v" -v m="$bestv" 'BEGIN {exit !(a < m)}'; then best=$algo; bestv=$v; fi
    done
    echo "$row | $(value "model$n" "$b") | $best |"
  done
done

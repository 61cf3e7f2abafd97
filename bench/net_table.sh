#!/usr/bin/env bash
# Figures of the network path for docs/performance.md (benchmarks, never
# tests). Every Weft rank here is its own virtual node (WEFT_RANKS_PER_NODE=1),
# so every byte crosses the socket network and the proxy.
#
# 1. Bandwidth between two processes on loopback: `weft-perf sendrecv -np 2`
#    (each rank sends N bytes to the other and receives N at once) for
#    several NCCL_SOCKET_NTHREADS, next to bench/tcp_stream doing the same
#    exchange on plain TCP sockets (the limit).
# 2. Allreduce latency at small sizes, Tree versus Ring, on 2, 4, 8 and 16
#    virtual nodes (processes).
# Rounds are interleaved (RUNS, default 5); tables give the median of the
# per-round medians.   Usage: bench/net_table.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WEFT_BACKEND=host WEFT_RANKS_PER_NODE=1
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
perf() {  # name, weft-perf args...: appends "bytes time(us)" (out-of-place)
  local name=$1; shift
  "$build/bin/weft-perf" "$@" --median | awk '/^ *[0-9]/ {print $1, $6}' >>"$tmp/$name"
}
value() { awk -v b="$2" '$1 == b {print $2}' "$tmp/$1" | median; }

bw_sizes="8 4096 32768 262144 2097152 16777216"
for ((r = 0; r < runs; r++)); do
  "$build/bin/tcp_stream" 10 $((16 << 20)) | awk '/^ *[0-9]/ {print $1, $2}' >>"$tmp/tcp"
  for t in 0 1 2 4; do
    NCCL_SOCKET_NTHREADS=$t perf "sock$t" sendrecv -np 2 -b 8 -e 16M -f 8 -n 10 -w 3
  done
done
echo "### Socket transport between two processes (loopback), bytes each way per call"
echo
echo "| bytes | TCP stream (us) | GB/s | Weft 0 threads (us) | Weft 1 thread | Weft 2 threads | Weft 4 threads | best Weft GB/s | of the limit |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for b in $bw_sizes; do
  tcp=$(value tcp "$b")
  row="| $b | $tcp | $(awk -v b="$b" -v t="$tcp" 'BEGIN {printf "%.3f", b / (t * 1e3)}')"
  best=1e30
  for t in 0 1 2 4; do
    v=$(value "sock$t" "$b")
    row+=" | $v"
    best=$(awk -v a="$best" -v v="$v" 'BEGIN {print (v < a ? v : a)}')
  done
  row+=" | $(awk -v b="$b" -v t="$best" 'BEGIN {printf "%.3f", b / (t * 1e3)}')"
  row+=" | $(awk -v t="$tcp" -v w="$best" 'BEGIN {printf "%.0f%%", 100 * t / w}') |"
  echo "$row"
done

lat_sizes="8 512 4096 32768"
for ((r = 0; r < runs; r++)); do
  for n in 2 4 8 16; do
    for algo in Ring Tree; do
      NCCL_ALGO=$algo perf "$algo$n" allreduce -np "$n" -b 8 -e 64K -f 8 -n 20 -w 5
    done
  done
done
echo
echo "### Allreduce latency (us), Tree vs Ring, one rank per virtual node"
echo
echo "| bytes | 2 nodes Ring | Tree | 4 nodes Ring | Tree | 8 nodes Ring | Tree | 16 nodes Ring | Tree |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for b in $lat_sizes; do
  row="| $b"
  for n in 2 4 8 16; do row+=" | $(value "Ring$n" "$b") | $(value "Tree$n" "$b")"; done
  echo "$row |"
done

#!/usr/bin/env bash
# Runs NVIDIA's nccl-tests binaries, which you built (see below), on Weft:
# proves every binary loads Weft's libnccl.so.2 and finds each nccl* symbol
# it uses there, and, where a CUDA device is usable, runs them:
#   - every *_perf binary: one rank (-g 1), all sizes 8 B .. 1 GiB, with the
#     data check (-c 1);
#   - every *_perf binary again at 2 and 4 ranks on GPU 0 as threads (-t N),
#     through libweft-onegpu.so (--threads "LIST" to choose, "" for none);
#   - every *_perf_mpi binary (an MPI build): several ranks on GPU 0 (-np 2
#     and 4 under mpirun, NCCL_TESTS_DEVICE=0), which across processes needs
#     MPS or WEFT_SHARE_GPU_WITHOUT_MPS=1 (docs/architecture.md);
#   - bench/gpu_ranks_bench: 2 and 4 ranks (threads) on GPU 0, allreduce busbw
#     next to the device-to-device copy bandwidth (the limit).
# With --compare, the one-rank 8 B latency and 1 GiB bandwidth are measured
# again with the same binaries on the libnccl.so.2 that ships with CUDA.
#
# usage: bench/nccl-tests.sh NCCL_TESTS_BINARIES [--build-dir DIR] [--out DIR] [--compare] [--check-only] [--threads LIST]
# NCCL_TESTS_BINARIES is a directory holding nccl-tests binaries (searched two
# levels deep, so a folder of several builds works). nccl-tests is not part of
# Weft; build it yourself against Weft's install tree (README, "nccl-tests"):
#   make -C nccl-tests NCCL_HOME=/opt/weft CUDA_HOME=/usr/local/cuda
# Weft's library is taken from DIR/lib (default build/lib). Results go to
# OUT/*.log and OUT/summary.txt (default build/nccl-tests).
set -euo pipefail
binDir=$(cd "${1:?usage: bench/nccl-tests.sh NCCL_TESTS_BINARIES [options]}" && pwd)
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/build/nccl-tests
compare=0
checkOnly=0
threadRanks="2 4"
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --out) mkdir -p "$2"; out=$(cd "$2" && pwd); shift 2 ;;
    --compare) compare=1; shift ;;
    --check-only) checkOnly=1; shift ;;
    --threads) threadRanks=$2; shift 2 ;;
    *) echo "nccl-tests.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
cuda=${CUDA_HOME:-/usr/local/cuda}
# Each run ends within this many seconds (a hang must not eat a device
# machine's budget); Weft's own calls fail sooner under WEFT_TIMEOUT.
runLimit=${NCCL_TESTS_RUN_LIMIT:-120}
weftLib=$build/lib
[ -e "$weftLib/libnccl.so.2" ] || { echo "nccl-tests.sh: no $weftLib/libnccl.so.2: build Weft first" >&2; exit 1; }
mkdir -p "$out"

# Every binary: libnccl.so.2 from Weft, every nccl symbol defined by Weft.
nm -D --defined-only "$weftLib/libnccl.so.2" | awk '{print $3}' | sort -u >"$out/weft-symbols.txt"
bins=$(find "$binDir" -maxdepth 2 -type f \( -name '*_perf' -o -name '*_perf_mpi' \) -perm -u+x | sort)
[ -n "$bins" ] || { echo "nccl-tests.sh: no *_perf or *_perf_mpi binaries in $binDir" >&2; exit 1; }
weftReal=$(readlink -f "$weftLib/libnccl.so.2")
bad=0
for bin in $bins; do
  # Whichever libnccl.so it was linked with (Weft's or the CUDA toolkit's),
  # it records libnccl.so.2; with Weft's directory first that must be Weft's file.
  loaded=$(LD_LIBRARY_PATH=$weftLib ldd "$bin" | awk '$1 ~ /^lib(nccl|weft)\.so/ {print $1 " " $3}')
  while read -r name lib; do
    [ -n "$name" ] || continue
    if [ "$name" != libnccl.so.2 ] || [ "$(readlink -f "$lib")" != "$weftReal" ]; then
      echo "nccl-tests.sh: $bin loads $name => $lib, not Weft's $weftReal" >&2
      bad=1
    fi
  done <<<"$loaded"
  [ -n "$loaded" ] || { echo "nccl-tests.sh: $bin loads no NCCL library" >&2; bad=1; }
  missing=$(nm -D --undefined-only "$bin" | awk '{print $2}' | grep -E '^p?nccl' | sed 's/@.*//' | sort -u |
    comm -23 - "$out/weft-symbols.txt")
  if [ -n "$missing" ]; then
    echo "nccl-tests.sh: $bin needs nccl symbols Weft lacks: $missing" >&2
    bad=1
  fi
done
count=$(echo "$bins" | wc -l)
used=$(for bin in $bins; do nm -D --undefined-only "$bin" | awk '{print $2}'; done | grep -E '^nccl' | sort -u | tr '\n' ' ')
echo "checked: $count binaries load $weftReal; nccl symbols used: $used" |
  tee "$out/summary.txt"
[ $bad = 0 ] || exit 1
[ $checkOnly = 1 ] && exit 0

if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; }; then
  echo "nccl-tests.sh: no usable CUDA device: checked only" | tee -a "$out/summary.txt"
  exit 0
fi

# Lines of nccl-tests' output: the data rows and the '# Avg bus bandwidth' line.
summarize() {  # name log
  local wrong
  wrong=$(awk '!/^#/ && NF >= 13 {w += $9 + $13} END {print w + 0}' "$2")
  echo "$1: #wrong total $wrong; $(grep -h 'Avg bus bandwidth' "$2" | tr -s ' ')" | tee -a "$out/summary.txt"
}
runOne() {  # name lib cmd...
  local name=$1 lib=$2
  shift 2
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout "$runLimit" "$@" >"$out/$name.log" 2>&1 ||
    echo "$name: exit $? (124: ran past ${runLimit} s)" | tee -a "$out/summary.txt"
  summarize "$name" "$out/$name.log"
}
# Log names carry the binary's folder below NCCL_TESTS_BINARIES, so several
# builds of one test do not overwrite each other's logs.
tag() { local rel=${1#"$binDir"/}; echo "${rel//\//-}"; }
for bin in $(grep -E '_perf$' <<<"$bins"); do
  runOne "weft-1rank-$(tag "$bin")" "$weftLib" "$bin" -b 8 -e 1G -f 4 -g 1 -c 1 -w 5 -n 20
done
# Several ranks on GPU 0 as threads of one process (-t N -g 1): nccl-tests
# gives thread i device i, so libweft-onegpu.so (bench/onegpu_shim.c) is
# preloaded to show the program N devices, every one of them GPU 0.
shim=$build/lib/libweft-onegpu.so
for np in $threadRanks; do
  [ -e "$shim" ] || { echo "nccl-tests.sh: no $shim: thread runs skipped" | tee -a "$out/summary.txt"; break; }
  for bin in $(grep -E '_perf$' <<<"$bins"); do
    runOne "weft-${np}threads-gpu0-$(tag "$bin")" "$weftLib" env LD_PRELOAD="$shim" WEFT_ONEGPU_DEVICES="$np" \
      "$bin" -b 8 -e 1G -f 4 -t "$np" -g 1 -c 1 -w 5 -n 20
  done
done
for bin in $(grep -E '_perf_mpi$' <<<"$bins"); do
  for np in 2 4; do
    runOne "weft-${np}ranks-gpu0-$(tag "$bin")" "$weftLib" mpirun --allow-run-as-root --oversubscribe -np "$np" \
      -x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE=0 "$bin" -b 8 -e 256M -f 4 -g 1 -c 1 -w 5 -n 20
  done
done
# The limit for several ranks on one GPU: device-to-device copy bandwidth,
# next to Weft's allreduce busbw (threads, one rank each; bench/gpu_ranks_bench.cc).
for np in 2 4; do
  timeout "$runLimit" "$build/bin/gpu_ranks_bench" "$np" 20 >"$out/gpu-ranks-$np.log" 2>&1 || echo "gpu_ranks_bench $np: exit $?"
  echo "gpu_ranks_bench $np ranks: $(tail -1 "$out/gpu-ranks-$np.log")" | tee -a "$out/summary.txt"
done
allreduce=$(grep -E '/all_reduce_perf$' <<<"$bins" | head -1 || true)
if [ $compare = 1 ] && [ -z "$allreduce" ]; then
  echo "nccl-tests.sh: --compare needs all_reduce_perf" | tee -a "$out/summary.txt"
elif [ $compare = 1 ]; then
  for lib in "$weftLib" "$cuda/lib64"; do
    which=$([ "$lib" = "$weftLib" ] && echo weft || echo nvidia)
    runOne "$which-latency-all_reduce" "$lib" "$allreduce" -b 8 -e 8 -g 1 -c 0 -w 100 -n 1000
    runOne "$which-bandwidth-all_reduce" "$lib" "$allreduce" -b 1G -e 1G -g 1 -c 0 -w 5 -n 20
  done
fi

#!/usr/bin/env bash
# Everything only a GPU can show, in one call (GPU time is short):
#   1. a release build with the CUDA kernels (all cores);
#   2. the gpu-labelled tests (ctest -L gpu; on a machine without a usable
#      GPU they skip themselves, so this step proves nothing there);
#   3. weft-perf allreduce on the cuda backend: 1 rank, and 4 ranks on GPU 0
#      as threads (across processes that needs MPS);
#   4. with NCCL_TESTS_BINARIES (a directory of nccl-tests binaries you built
#      against Weft; README, "nccl-tests"): every binary checked and run on
#      Weft, several ranks on GPU 0, and the comparison with CUDA's libnccl
#      (bench/nccl-tests.sh --compare).
# Logs and a summary go to OUT (default build-gpu/results).
#
# usage: scripts/gpu-check.sh [NCCL_TESTS_BINARIES]
set -uo pipefail
cd "$(dirname "$0")/.."
binaries=${1:-}
dir=build-gpu
out=${OUT:-$dir/results}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
gpu=$(nvidia-smi -L 2>/dev/null | head -1)
note "gpu-check $(date -u +%FT%TZ) on $(hostname): ${gpu:-no GPU listed by nvidia-smi}"

cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release >"$out/configure.log" 2>&1 || { note "configure failed"; exit 1; }
start=$(date +%s)
cmake --build "$dir" -j"$(nproc)" >"$out/build.log" 2>&1 || { note "build failed (build.log)"; exit 1; }
note "build: $(( $(date +%s) - start )) s with $(nproc) jobs"

(cd "$dir" && ctest -L gpu --output-on-failure --timeout 300) >"$out/ctest-gpu.log" 2>&1
note "ctest -L gpu: exit $?; $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
note "skipped gpu tests: $(grep -c 'Skipped' "$out/ctest-gpu.log")"

for np in 1 4; do
  WEFT_BACKEND=cuda "$dir/bin/weft-perf" allreduce -b 8 -e 256M -f 8 -c 1 -np "$np" --threads >"$out/weft-perf-$np.log" 2>&1
  note "weft-perf allreduce cuda $np rank(s) on GPU 0: exit $?; $(grep 'Avg bus bandwidth' "$out/weft-perf-$np.log")"
done
# What the cuda backend runs only when asked: each extra algorithm, one-shot
# under both protocols, LL and LL128 on the ring, and direct mode, against
# the default
# at 4 ranks on GPU 0 (checked: -c 1). A variant is settings joined by '+'.
for variant in default NCCL_ALGO=Butterfly NCCL_ALGO=HalvingDoubling NCCL_ALGO=Torus2D NCCL_ALGO=OneShot \
  NCCL_ALGO=OneShot+NCCL_PROTO=LL NCCL_ALGO=Ring+NCCL_PROTO=LL NCCL_ALGO=Ring+NCCL_PROTO=LL128 \
  WEFT_DIRECT=1; do
  settings=()
  [ "$variant" != default ] && IFS='+' read -ra settings <<<"$variant"
  log="$out/weft-perf-4-${variant//[^A-Za-z0-9_]/_}.log"
  env WEFT_BACKEND=cuda ${settings[@]+"${settings[@]}"} "$dir/bin/weft-perf" allreduce -b 8 -e 64M -f 8 -c 1 -np 4 --threads \
    >"$log" 2>&1
  note "weft-perf allreduce cuda 4 ranks, $variant: exit $?; $(grep 'Avg bus bandwidth' "$log")"
done
# Processes sharing GPU 0 in direct mode: buffers in windows (-R 2, written
# through the peers' CUDA IPC mappings) against unregistered ones (slots).
for reg in 0 2; do
  log="$out/weft-perf-2proc-direct-R$reg.log"
  WEFT_BACKEND=cuda WEFT_DIRECT=1 "$dir/bin/weft-perf" allreduce -b 1M -e 256M -f 4 -c 1 -np 2 -R "$reg" >"$log" 2>&1
  note "weft-perf allreduce cuda 2 processes, WEFT_DIRECT=1 -R $reg: exit $?; $(grep 'Avg bus bandwidth' "$log")"
done

if [ -n "$binaries" ]; then
  bench/nccl-tests.sh "$binaries" --build-dir "$dir" --out "$out/nccl-tests" --compare >"$out/nccl-tests.log" 2>&1
  note "nccl-tests: exit $?"
  tee -a "$summary" <"$out/nccl-tests/summary.txt" 2>/dev/null
fi

#!/usr/bin/env bash
# Everything only a GPU can show (issue 18), in steps that fit the device
# machine's budget (at most 10 minutes a call, about 15 in all): run
#   STEPS="build tests" scripts/gpu-check.sh
# first, then the rest on the same warm machine (build-gpu/ is kept there).
# Steps, in this order (default: all):
#   build     a release build of what the steps use (all cores)
#   tests     the gpu-labelled tests (ctest -L gpu), WEFT_TIMEOUT=60 so a hung
#             kernel ends within a minute (on a machine without a usable GPU
#             they skip themselves: the summary counts the skips)
#   sanitize  compute-sanitizer memcheck, racecheck and synccheck on the
#             kernel tests
#   perf      weft-perf allreduce on the cuda backend: 1 rank, 4 ranks on GPU 0
#   variants  the same at 4 ranks under each algorithm and protocol the cuda
#             backend runs only when asked, and direct mode
#   procs     2 processes on GPU 0, direct mode, windows against slots, and
#             the gpu tests whose ranks are processes (GpuWindows); these and
#             torch and nccl run under an MPS daemon the script starts (in
#             build-gpu/mps, stopped after) where one starts and serves, else
#             with WEFT_SHARE_GPU_WITHOUT_MPS=1 (the kernels take turns in
#             time slices: correct, slow)
#   ranks     bench/gpu_ranks_bench: 2, 4 and 8 ranks against the device's
#             copy bandwidth
#   torch     scripts/torch-gpu-check.py: PyTorch's own build on Weft, 2
#             processes on GPU 0 (DDP step, collectives, abort)
#   nccl      with NCCL_TESTS_BINARIES (a directory of nccl-tests binaries
#             built against Weft by hand; README, "nccl-tests"): every binary
#             checked and run (bench/nccl-tests.sh --compare)
#   rxe       whether the kernel has soft-RoCE (rdma_rxe), for the IB work
# Logs and a summary go to build-gpu/results; with OUT set (the device
# machine's), summary.txt and one archive of the logs are copied there at exit.
#
# The GPU machine may lack GoogleTest: copy its sources next to the tree
# (cp -r /usr/src/googletest gtest-src, git-ignored) and carry gtest-src
# with the call, or name them with WEFT_GTEST_SOURCE.
#
# usage: [STEPS="..."] scripts/gpu-check.sh [NCCL_TESTS_BINARIES]
set -uo pipefail
cd "$(dirname "$0")/.."
binaries=${1:-}
steps=" ${STEPS:-build tests sanitize perf variants procs ranks torch nccl rxe} "
has() { [[ "$steps" == *" $1 "* ]]; }
dir=build-gpu
out=$dir/results
mkdir -p "$out"
summary=$out/summary.txt
touch "$summary"
note() { echo "$*" | tee -a "$summary"; }
mps=0
# Processes sharing GPU 0 (the steps procs, torch, nccl): under an MPS
# daemon of our own where one starts and serves a client (a one-rank cuda
# call is the probe), else taking turns in time slices
# (WEFT_SHARE_GPU_WITHOUT_MPS=1: correct, slow). Always succeeds.
mpsOn() {
  [ "$mps" != 0 ] && return 0
  export WEFT_SHARE_GPU_WITHOUT_MPS=1
  mps=2
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    note "MPS: nvidia-cuda-mps-control not found; processes sharing GPU 0 take turns in time slices"
    return 0
  fi
  export CUDA_MPS_PIPE_DIRECTORY=$PWD/$dir/mps/pipe CUDA_MPS_LOG_DIRECTORY=$PWD/$dir/mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d >/dev/null 2>&1; then
    sleep 1
    if WEFT_BACKEND=cuda WEFT_TIMEOUT=20 timeout 30 "$dir/bin/weft-perf" allreduce -b 8 -e 8 -np 1 -n 1 -w 0 \
      >"$out/mps-probe.log" 2>&1; then
      mps=1
      note "MPS: daemon started in $dir/mps and serving"
      return 0
    fi
    note "MPS: the daemon started but a client failed (mps-probe.log); processes sharing GPU 0 take turns in time slices"
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  else
    note "MPS: the daemon did not start; processes sharing GPU 0 take turns in time slices"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return 0
}
mpsOff() {
  [ "$mps" = 1 ] && echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  mps=0
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY WEFT_SHARE_GPU_WITHOUT_MPS
}
finish() {
  mpsOff
  if [ -n "${OUT:-}" ] && [ "$(realpath -m "$OUT")" != "$(realpath -m "$out")" ]; then
    mkdir -p "$OUT"
    cp "$summary" "$OUT/summary.txt"
    tar czf "$OUT/gpu-check-logs.tar.gz" -C "$dir" results 2>/dev/null
  fi
}
trap finish EXIT
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
note "gpu-check $(date -u +%FT%TZ) on $(hostname), steps:${steps}: ${gpu:-no GPU listed by nvidia-smi}"

if has build; then
  gtest=${WEFT_GTEST_SOURCE:-}
  [ -z "$gtest" ] && [ -d gtest-src ] && gtest=$PWD/gtest-src
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=ON ${gtest:+-DWEFT_GTEST_SOURCE="$gtest"} \
    >"$out/configure.log" 2>&1 || { note "configure failed (configure.log)"; tail -20 "$out/configure.log"; exit 1; }
  start=$(date +%s)
  targets=(weft weft-perf gpu_ranks_bench weft-onegpu test_gpu_collectives test_gpu_algos test_gpu_api test_gpu_ordering
    test_gpu_kernels test_cuda_coop_wait test_net_gpu test_windows_gpu)
  cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1 ||
    { note "build failed (build.log)"; tail -20 "$out/build.log"; exit 1; }
  note "build: $(( $(date +%s) - start )) s with $(nproc) jobs"
fi

if has tests; then
  (cd "$dir" && WEFT_TIMEOUT=${WEFT_TIMEOUT:-60} ctest -L gpu --output-on-failure --timeout 150) \
    >"$out/ctest-gpu.log" 2>&1
  note "ctest -L gpu: exit $?; $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
  note "skipped gpu tests: $(grep -c '(Skipped)' "$out/ctest-gpu.log")"
  grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run|Exception|ILLEGAL|BUS|Child aborted)\)' "$out/ctest-gpu.log" | tee -a "$summary"
fi

if has sanitize; then
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck synccheck; do
      log="$out/sanitizer-$tool.log"
      WEFT_TIMEOUT=60 timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 "$dir/bin/test_gpu_kernels" \
        >"$log" 2>&1
      note "compute-sanitizer $tool test_gpu_kernels: exit $? (124: timed out); $(grep -E 'ERROR SUMMARY' "$log" | tail -1)"
    done
    log="$out/sanitizer-memcheck-collectives.log"
    WEFT_TIMEOUT=60 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$dir/bin/test_gpu_collectives" \
      --gtest_filter='*ThreadsShareOneGpu*' >"$log" 2>&1
    note "compute-sanitizer memcheck test_gpu_collectives: exit $?; $(grep -E 'ERROR SUMMARY' "$log" | tail -1)"
  else
    note "compute-sanitizer: not found"
  fi
fi

perf() {  # log, settings..., -- weft-perf args...
  local log=$1; shift
  local settings=()
  while [ "$1" != -- ]; do settings+=("$1"); shift; done
  shift
  env WEFT_BACKEND=cuda WEFT_TIMEOUT=60 ${settings[@]+"${settings[@]}"} timeout 120 "$dir/bin/weft-perf" "$@" >"$log" 2>&1
}

if has perf; then
  for np in 1 4; do
    perf "$out/weft-perf-$np.log" -- allreduce -b 8 -e 256M -f 8 -c 1 -np "$np" --threads
    note "weft-perf allreduce cuda $np rank(s) on GPU 0: exit $?; $(grep 'Avg bus bandwidth' "$out/weft-perf-$np.log")"
  done
fi

# What the cuda backend runs only when asked: each extra algorithm, one-shot
# under both protocols, LL and LL128 on the ring, and direct mode, against
# the default at 4 ranks on GPU 0 (checked: -c 1). A variant is settings
# joined by '+'.
if has variants; then
  for variant in default NCCL_ALGO=Butterfly NCCL_ALGO=HalvingDoubling NCCL_ALGO=Torus2D NCCL_ALGO=OneShot \
    NCCL_ALGO=OneShot+NCCL_PROTO=LL NCCL_ALGO=Ring+NCCL_PROTO=LL NCCL_ALGO=Ring+NCCL_PROTO=LL128 \
    WEFT_DIRECT=1; do
    settings=()
    [ "$variant" != default ] && IFS='+' read -ra settings <<<"$variant"
    log="$out/weft-perf-4-${variant//[^A-Za-z0-9_]/_}.log"
    perf "$log" ${settings[@]+"${settings[@]}"} -- allreduce -b 8 -e 64M -f 8 -c 1 -np 4 --threads
    note "weft-perf allreduce cuda 4 ranks, $variant: exit $?; $(grep 'Avg bus bandwidth' "$log")"
  done
fi

# Processes sharing GPU 0 in direct mode: buffers in windows (-R 2, written
# through the peers' CUDA IPC mappings) against unregistered ones (slots).
if has procs && mpsOn; then
  (cd "$dir" && WEFT_TIMEOUT=60 ctest -L gpu -R GpuWindows --output-on-failure) >"$out/ctest-windows.log" 2>&1
  note "ctest GpuWindows (processes, MPS): exit $?; $(grep -E 'tests passed|tests failed' "$out/ctest-windows.log" | tail -1)"
  for reg in 0 2; do
    log="$out/weft-perf-2proc-direct-R$reg.log"
    perf "$log" WEFT_DIRECT=1 -- allreduce -b 1M -e 256M -f 4 -c 1 -np 2 -R "$reg"
    note "weft-perf allreduce cuda 2 processes, WEFT_DIRECT=1 -R $reg: exit $?; $(grep 'Avg bus bandwidth' "$log")"
  done
fi

if has ranks; then
  for np in 2 4 8; do
    log="$out/gpu-ranks-$np.log"
    WEFT_TIMEOUT=60 timeout 120 "$dir/bin/gpu_ranks_bench" "$np" 20 >"$log" 2>&1
    note "gpu_ranks_bench $np ranks: exit $?; $(tail -1 "$log")"
  done
fi

if has torch && mpsOn; then
  log="$out/torch.log"
  WEFT_TIMEOUT=60 timeout 240 python3 scripts/torch-gpu-check.py --lib "$dir/lib" >"$log" 2>&1
  note "torch-gpu-check: exit $?; $(grep -E '^(PASS|FAIL)' "$log" | tr '\n' ';')"
fi

if has nccl && [ -n "$binaries" ]; then
  mpsOn
  timeout 400 bench/nccl-tests.sh "$binaries" --build-dir "$dir" --out "$out/nccl-tests" --compare \
    >"$out/nccl-tests.log" 2>&1
  note "nccl-tests: exit $?"
  tee -a "$summary" <"$out/nccl-tests/summary.txt" 2>/dev/null
fi

mpsOff

if has rxe; then
  if modprobe -n rdma_rxe >/dev/null 2>&1; then
    note "soft-RoCE: rdma_rxe module available ($(uname -r))"
  else
    note "soft-RoCE: rdma_rxe not available ($(uname -r))"
  fi
fi

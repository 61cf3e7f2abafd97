#!/usr/bin/env bash
# Builds and runs the whole test suite: the default build (with the CUDA
# kernels when nvcc exists), its Debian packages checked as a user gets them,
# then the suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
# --tsan runs the suite under ThreadSanitizer instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
nvidiaLib=/usr/local/cuda/lib64   # NVIDIA's libnccl.so.2, when the toolkit ships it
run_suite() {  # build-dir, cmake args... (ctest arguments in CTEST_ARGS)
  local dir=$1; shift
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  # shellcheck disable=SC2086 # CTEST_ARGS is a list of arguments (split, never globbed: set -f)
  (set -f && cd "$dir" && ctest --output-on-failure --timeout 600 -j"$jobs" ${CTEST_ARGS:-})
}
if [ "${1:-}" = "--tsan" ]; then
  run_suite build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread -DWEFT_ENABLE_CUDA=OFF
  exit 0
fi
start=$(date +%s)
# The kernels as sm_90 machine code where a GPU will run them; elsewhere as
# PTX alone (compute_90, which a driver would compile at load): every line
# of them still goes through nvcc's front end and optimizer, and the build
# skips ptxas, half of the kernels' build time (docs/testing.md). A GPU
# machine's own checks (scripts/gpu-check.sh) build sm_90 in build-gpu/.
# Without a GPU, NVVM also optimises the device code at -O1 rather than 3:
# the same front end and instantiations, a sixth of the time
# (cmake/WeftFlags.cmake, WEFT_CUDA_NVVM_OPT).
cudaArch=90-virtual nvvmOpt=1
if [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; then cudaArch=90 nvvmOpt=; fi
# Explicit settings: scripts/demo.sh may have configured build/ for the host only.
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_ENABLE_CUDA=AUTO -DWEFT_BUILD_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$cudaArch" -DWEFT_CUDA_NVVM_OPT="$nvvmOpt"
echo "test.sh: default suite passed in $(( $(date +%s) - start )) s"

# The .debs, unpacked into an empty directory: CMake and pkg-config consumers
# built and run against it alone, the tools run from it, and a program built
# against Weft run on NVIDIA's libnccl.so.2 by LD_LIBRARY_PATH.
start=$(date +%s)
tests/scripts/check_packages.sh build . "$nvidiaLib"
echo "test.sh: packages checked in $(( $(date +%s) - start )) s"

# The Python package's tests (python/) ran in the default suite (ctest
# Python.Tests, against build/'s library); the sanitizer builds skip them.

start=$(date +%s)
# The same tests under the sanitizers, two sweeps shortened: the fault trials
# run 3 times per setting instead of 10 (their waits are wall time, and the
# default suite ran all 10 under -O3), and the border sweeps stop at 5 ranks
# (6 to 8 take 25-43 s each under ASan, the same code as 5; the default
# suite ran them). 2026-11-28, this 2-core VM: the ASan suite's tests took
# 17 min before, 11.6 after (docs/testing.md).
WEFT_FAULT_TRIALS=3 CTEST_ARGS="-E Borders\..*_[678]ranks" \
  run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address -DWEFT_ENABLE_CUDA=OFF
echo "test.sh: ASan+UBSan suite passed in $(( $(date +%s) - start )) s"

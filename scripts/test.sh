#!/usr/bin/env bash
# Builds and runs the whole test suite: the default build (with the CUDA
# kernels when nvcc exists), then the suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer. --tsan runs it under ThreadSanitizer instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
run_suite() {  # build-dir, cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j"$jobs")
}
if [ "${1:-}" = "--tsan" ]; then
  run_suite build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread -DWEFT_ENABLE_CUDA=OFF
  exit 0
fi
start=$(date +%s)
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "test.sh: default suite passed in $(( $(date +%s) - start )) s"
start=$(date +%s)
run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address -DWEFT_ENABLE_CUDA=OFF
echo "test.sh: ASan+UBSan suite passed in $(( $(date +%s) - start )) s"

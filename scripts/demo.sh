#!/usr/bin/env bash
# Sets up, builds and runs the main job: allreduce across 4 local ranks on
# the host backend, with time, bandwidth and a correctness verdict.
# Builds only what that needs: the library on the host backend, weft-demo and
# weft-perf, into build/, without debug information (the CUDA kernels and the
# tests are built by scripts/test.sh, with it). A build/ that is already
# configured keeps its settings.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
start=$(date +%s)
config=()
[ -f build/CMakeCache.txt ] || config=(-DCMAKE_BUILD_TYPE=Release -DWEFT_ENABLE_CUDA=OFF -DWEFT_BUILD_TESTS=OFF)
echo "demo: configuring build/"
cmake -S . -B build "${config[@]}" >/dev/null
echo "demo: building the library, weft-demo and weft-perf with $(nproc) jobs"
cmake --build build -j"$(nproc)" --target weft-demo weft-perf
echo "demo: built in $(( $(date +%s) - start )) s; running build/bin/weft-demo -n 4 $*"
exec build/bin/weft-demo -n 4 "$@"

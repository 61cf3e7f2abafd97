#!/usr/bin/env bash
# Sets up, builds and runs the main job: allreduce across 4 local ranks on
# the host backend, with time, bandwidth and a correctness verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target weft-demo >/dev/null
exec build/bin/weft-demo -n 4 "$@"

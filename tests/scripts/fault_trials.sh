#!/usr/bin/env bash
# The long form of the fault trials (tests/multirank/fault_test.cc): N trials
# per setting (100 by default; CI runs 10). Prints one summary line per
# setting: trials, failures, bound and worst time.
# Usage: tests/scripts/fault_trials.sh [N] [build-dir]
set -euo pipefail
trials=${1:-100}
build=${2:-build}
binary="$build/bin/test_faults"
[ -x "$binary" ] || { echo "$binary not found: build the tests first (scripts/test.sh or cmake --build $build)" >&2; exit 2; }
WEFT_FAULT_TRIALS=$trials "$binary" | tee /dev/stderr | grep -E '^fault trials' || true

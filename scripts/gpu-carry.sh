#!/usr/bin/env bash
# Takes a build made here to the GPU machine instead of building there: the
# device machine's time is short (about 15 minutes a session, the start
# included) and a build there costs several of them, while here it costs
# only wall time (about an hour at -j2: the kernels dominate).
#
# Here:
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=ON
#   cmake --build build-gpu -j2 --target <the targets scripts/gpu-check.sh builds>
#   scripts/gpu-carry.sh pack [NCCL_TESTS_BINARIES]
# packs build-gpu (no objects or archives, no debug information, no stale
# programs) into .devout/ (git-ignored), and
# the nccl-tests binaries of that directory, if given (built by hand beside
# the project; README, "nccl-tests"), stripped. Files over CARRY_MAX_MB
# (default 40) are left out and named: the device call carries 64 MiB in
# all, and a binary that links the kernels statically is about 100 MB (no
# target of gpu-check.sh does since test_gpu_algos links the shared
# library). Then, with the device tool, carry .devout and run
#   scripts/gpu-carry.sh run
# which unpacks at the path the build was made at (through a link where the
# checkout there lies elsewhere, since CTest files name absolute paths), runs
# scripts/gpu-check.sh's STEPS (default "tests rxe") within CHECK_LIMIT
# seconds (default 230), then bench/nccl-tests.sh (when binaries were packed;
# NCCL_TESTS_ARGS, default --compare) within NCCL_TESTS_LIMIT seconds
# (default 230), and copies summary.txt and the logs to $OUT.
# The binaries left out go, each compressed on its own, into .devout-big/
# (about 40 MB for such a binary): a second call carries .devout-big and runs
#   scripts/gpu-carry.sh run-big
# which runs each of them as a gtest binary (no CTest tree needed: they are
# linked statically) with the gpu label's settings, within BIG_LIMIT seconds
# (default 300), the output in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
carry=.devout
mode=${1:?usage: scripts/gpu-carry.sh pack [NCCL_TESTS_BINARIES] | run | run-big}

if [ "$mode" = pack ]; then
  [ -e build-gpu/lib/libnccl.so.2 ] || { echo "gpu-carry: build build-gpu first" >&2; exit 1; }
  mkdir -p "$carry"
  rm -f "$carry"/build.txz "$carry"/nccl-tests.txz
  maxMb=${CARRY_MAX_MB:-40}
  # A staged copy: no objects or archives, the binaries and libraries
  # without their debug information (their symbols stay, for backtraces;
  # RelWithDebInfo doubles them), and no program older than the library,
  # which this build did not make (CMake relinks every program that links
  # the library when it changes): a stale one is not among gpu-check.sh's
  # targets and may not even run against it.
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  tar cf - --exclude='*.o' --exclude='*.a' --exclude=CMakeFiles --exclude=googletest --exclude='*.cu' build-gpu |
    tar xf - -C "$stage" || exit 1
  lib=$(readlink -f build-gpu/lib/libnccl.so.2)
  find "$stage/build-gpu/bin" -type f ! -newer "$lib" -print -delete | sed 's|^.*/build-gpu/|gpu-carry: left out (older than the library): build-gpu/|'
  find "$stage/build-gpu/bin" "$stage/build-gpu/lib" -type f -exec strip --strip-debug {} \; 2>/dev/null
  rm -rf "$carry-big"
  while read -r big; do
    echo "gpu-carry: left out ${big#"$stage"/} ($(( $(stat -c %s "$big") >> 20 )) MB, over ${maxMb} MB): into $carry-big/"
    mkdir -p "$carry-big"
    tar cJf "$carry-big/$(basename "$big").txz" -C "$(dirname "$big")" "$(basename "$big")" || exit 1
    rm -f "$big"
  done < <(find "$stage/build-gpu/bin" -type f -size +"${maxMb}"M)
  tar cJf "$carry/build.txz" -C "$stage" build-gpu || exit 1
  pwd >"$carry/source-path"
  if [ -n "${2:-}" ]; then
    staged=$(mktemp -d)
    mkdir "$staged/nccl-tests"
    find "$2" -maxdepth 2 -type f \( -name '*_perf' -o -name '*_perf_mpi' \) -perm -u+x -exec cp {} "$staged/nccl-tests/" \;
    strip "$staged/nccl-tests"/* 2>/dev/null
    tar cJf "$carry/nccl-tests.txz" -C "$staged" nccl-tests
    rm -rf "$staged"
  fi
  du -ch "$carry"/*.txz | tail -1 | sed 's/^/gpu-carry: to carry: /'
  exit 0
fi

if [ "$mode" = run-big ]; then
  [ -d "$carry-big" ] || { echo "gpu-carry: no $carry-big: pack here first and carry $carry-big" >&2; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  dir=$(mktemp -d)
  rc=0
  for archive in "$carry-big"/*.txz; do
    tar xJf "$archive" -C "$dir" || exit 1
    bin="$dir/$(basename "$archive" .txz)"
    log="${OUT:-$dir}/$(basename "$bin").log"
    start=$(date +%s)
    # tests/gpu/CMakeLists.txt's settings for the gpu label.
    WEFT_TIMEOUT=60 CUDA_DEVICE_MAX_CONNECTIONS=32 timeout "${BIG_LIMIT:-300}" "$bin" >"$log" 2>&1
    status=$?
    [ "$status" -eq 0 ] || rc=$status
    echo "gpu-carry: $(basename "$bin") exit $status in $(( $(date +%s) - start )) s; $(grep -cE '^\[       OK \]' "$log") passed," \
      "$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$log") failed, $(grep -cE '^\[  SKIPPED \]' "$log") skipped"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u
  done
  exit "$rc"
fi

[ "$mode" = run ] || { echo "gpu-carry: unknown mode $mode" >&2; exit 2; }
[ -f "$carry/build.txz" ] || { echo "gpu-carry: no $carry/build.txz: pack here first and carry $carry" >&2; exit 1; }
source=$(cat "$carry/source-path")
if [ "$(pwd -P)" != "$source" ]; then
  [ -e "$source" ] && { echo "gpu-carry: $source exists there and is not this checkout" >&2; exit 1; }
  mkdir -p "$(dirname "$source")" && ln -s "$(pwd -P)" "$source"
fi
cd "$source" || exit 1
rm -rf build-gpu
tar xJf "$carry/build.txz"
[ -f "$carry/nccl-tests.txz" ] && tar xJf "$carry/nccl-tests.txz" -C build-gpu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ldd build-gpu/bin/test_gpu_collectives | grep -E 'nccl|cudart|not found'
start=$(date +%s)
timeout "${CHECK_LIMIT:-230}" env STEPS="${STEPS:-tests rxe}" scripts/gpu-check.sh
echo "gpu-carry: gpu-check took $(( $(date +%s) - start )) s"
if [ -d build-gpu/nccl-tests ]; then
  start=$(date +%s)
  # shellcheck disable=SC2086 # NCCL_TESTS_ARGS is a list of options
  # Weft's own timeout well inside the run's limit, so a hang ends with
  # Weft's message naming the peer, not with the kill (2026-11-28: 60 s
  # against 40 s left the thread runs' hang unexplained).
  WEFT_TIMEOUT=${WEFT_TIMEOUT:-15} NCCL_TESTS_RUN_LIMIT=${NCCL_TESTS_RUN_LIMIT:-45} timeout "${NCCL_TESTS_LIMIT:-230}" \
    bench/nccl-tests.sh build-gpu/nccl-tests --build-dir build-gpu --out build-gpu/results/nccl-tests \
    ${NCCL_TESTS_ARGS:---compare}
  echo "gpu-carry: nccl-tests took $(( $(date +%s) - start )) s"
fi
if [ -n "${OUT:-}" ]; then
  cp build-gpu/results/summary.txt "$OUT/summary.txt" 2>/dev/null
  tar czf "$OUT/logs.tgz" -C build-gpu results
fi

#!/usr/bin/env bash
# What a user gets from an install tree (cmake --install, or the .debs
# unpacked), using nothing but that tree:
#   - a CMake project finds it by find_package(NCCL) / find_package(Weft)
#     (NCCL_ROOT, Weft_ROOT), by its own FindNCCL module (NCCL_ROOT), and by
#     NCCL_INCLUDE_DIR / NCCL_LIBRARY given outright; a pkg-config build finds
#     it by `pkg-config nccl` and `pkg-config weft`. With a CUDA toolkit's
#     include directory (NVIDIA's nccl.h) also on the path, Weft's header wins.
#     Every program records libnccl.so.2, loads the tree's library and runs an
#     allreduce;
#   - every tool in bin/ runs with no LD_LIBRARY_PATH, on the tree's library;
#   - given NVIDIA's library directory, the same program runs on NVIDIA's
#     libnccl.so.2 by LD_LIBRARY_PATH alone and reports NVIDIA's version.
# Usage: check_consumers.sh <prefix> <weft-source-dir> [nvidia-lib-dir]
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
prefix=$(cd "$1" && pwd) src=$2 nvidia=${3:-}
lib=$prefix/lib
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LD_LIBRARY_PATH
want=$(awk '/^#define NCCL_VERSION_CODE/ {print $3}' "$prefix/include/nccl.h")
cudaInclude=
[ -e /usr/local/cuda/include/nccl.h ] && cudaInclude=/usr/local/cuda/include
# A sanitizer build's library needs its runtime in the program too.
san=
libs=$(ldd "$lib/libnccl.so.2")
grep -q libasan <<<"$libs" && san="-fsanitize=address,undefined"
grep -q libtsan <<<"$libs" && san="-fsanitize=thread"

expectNeedsNccl() {  # binary: NEEDED libnccl.so.2, never libweft
  local needed
  needed=$(readelf -d "$1" | awk '/NEEDED/ {print $5}' | tr -d '[]')
  grep -qx libnccl.so.2 <<<"$needed" || { echo "$1 does not record libnccl.so.2: $needed"; exit 1; }
  if grep -q weft <<<"$needed"; then echo "$1 records a Weft name: $needed"; exit 1; fi
}
expectRuns() {  # binary [env...]: "consumer OK", on the tree's library
  local out
  out=$(env "${@:2}" "$1")
  grep -q "^consumer OK: $want from " <<<"$out" || { echo "$1: $out"; exit 1; }
  local loaded=${out##* from }
  [ "$(readlink -f "$loaded")" = "$(readlink -f "$lib/libnccl.so.2")" ] ||
    { echo "$1 loaded $loaded, not $lib/libnccl.so.2"; exit 1; }
  echo "  $(basename "$1"): $out"
}

cmakeConsumer() {  # name, cmake args...
  local dir=$work/$1
  shift
  cmake -S "$src/tests/consumer" -B "$dir" -DCMAKE_C_FLAGS="$san" -DCONSUMER_CUDA_INCLUDE="$cudaInclude" "$@" \
    >"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  cmake --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  for bin in "$dir"/consumer_*; do
    expectNeedsNccl "$bin"
    expectRuns "$bin"
  done
}
echo "CMake consumers against $prefix:"
cmakeConsumer config -DNCCL_ROOT="$prefix" -DWeft_ROOT="$prefix"
cmakeConsumer module -DCONSUMER_FIND_MODULE=ON -DNCCL_ROOT="$prefix"
cmakeConsumer explicit -DCONSUMER_FIND_MODULE=ON -DNCCL_INCLUDE_DIR="$prefix/include" -DNCCL_LIBRARY="$lib/libnccl.so"

echo "pkg-config consumers against $prefix:"
export PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_PATH=
[ "$(pkg-config --modversion nccl)" = "$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$prefix/include/nccl.h")" ]
for pc in nccl weft; do
  defs=
  [ $pc = weft ] && defs=-DCONSUMER_USES_WEFT
  # shellcheck disable=SC2046  # pkg-config's output is a list of flags
  cc $san $defs "$src/tests/consumer/consumer.c" $(pkg-config --cflags $pc) ${cudaInclude:+-isystem "$cudaInclude"} \
    $(pkg-config --libs $pc) -ldl -o "$work/consumer_pc_$pc"
  expectNeedsNccl "$work/consumer_pc_$pc"
  expectRuns "$work/consumer_pc_$pc" LD_LIBRARY_PATH="$lib"
done

echo "tools in $prefix/bin (no LD_LIBRARY_PATH):"
for tool in weft-demo weft-perf weft-topo weft-params weft-sim weft-tune; do
  [ -x "$prefix/bin/$tool" ] || { echo "missing $prefix/bin/$tool"; exit 1; }
  resolved=$(ldd "$prefix/bin/$tool" | awk '$1 == "libnccl.so.2" {print $3}')
  if [ -n "$resolved" ] && [ "$(readlink -f "$resolved")" != "$(readlink -f "$lib/libnccl.so.2")" ]; then
    echo "$tool resolves libnccl.so.2 to $resolved"; exit 1
  fi
done
# Output captured first: grep -q quitting early would break the pipe (pipefail).
params=$("$prefix/bin/weft-params")
grep -q NCCL_DEBUG <<<"$params"
# Detection runs hwloc, whose plugins keep memory until exit (tests/lsan.supp;
# the plugins have no frame pointers: the slow unwinder finds hwloc's frame).
ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  LSAN_OPTIONS="suppressions=$src/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" "$prefix/bin/weft-topo" --json |
  python3 -c 'import json, sys; json.load(sys.stdin)'
"$prefix/bin/weft-demo" -n 2 -i 2 -w 1 -e 4096 >"$work/demo.log" || { cat "$work/demo.log"; exit 1; }
"$prefix/bin/weft-perf" allreduce -b 8 -e 4K -f 8 -np 2 -n 2 -w 1 >"$work/perf.log" || { cat "$work/perf.log"; exit 1; }
grep -q 'Avg bus bandwidth' "$work/perf.log"
"$prefix/bin/weft-sim" --nodes 4 --gpus-per-node 2 --sizes 8 --json | python3 -c 'import json, sys; assert json.load(sys.stdin)["simulated"]'
echo "  weft-demo, weft-perf, weft-topo, weft-params, weft-sim ran"

if [ -n "$nvidia" ] && [ ! -e "$nvidia/libnccl.so.2" ]; then
  echo "no NVIDIA libnccl.so.2 in $nvidia: not run on it"
elif [ -n "$nvidia" ]; then
  out=$(LD_LIBRARY_PATH=$nvidia "$work/consumer_pc_nccl" --version)
  read -r version loaded <<<"$out"
  [ "$(readlink -f "$loaded")" = "$(readlink -f "$nvidia/libnccl.so.2")" ] && [ "$version" != "$want" ] ||
    { echo "with LD_LIBRARY_PATH=$nvidia: $out"; exit 1; }
  echo "the same program on NVIDIA's library by LD_LIBRARY_PATH: version $version from $loaded"
fi
echo "consumers OK"

#!/usr/bin/env bash
# bench/nccl-tests.sh --check-only on stand-ins for nccl-tests binaries (the
# real ones are not part of Weft): a program linked to Weft's library passes;
# one that needs an nccl symbol Weft does not export, or that loads another
# libnccl.so.2, is rejected with a message naming it.
# Usage: check_nccl_tests_script.sh <weft-build-dir> <weft-source-dir>
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
san=()
libs=$(ldd "$build/lib/libnccl.so.2")
grep -q libasan <<<"$libs" && san=(-fsanitize=address,undefined)
grep -q libtsan <<<"$libs" && san=(-fsanitize=thread)
check() {  # binaries-dir: the script's exit status and output
  "$src/bench/nccl-tests.sh" "$1" --build-dir "$build" --out "$work/out" --check-only >"$work/log" 2>&1
}

mkdir -p "$work/good/mpi"
cc "${san[@]}" "$src/tests/consumer/consumer.c" -I"$src/include" -L"$build/lib" -lnccl -ldl -o "$work/good/all_reduce_perf"
cp "$work/good/all_reduce_perf" "$work/good/mpi/all_reduce_perf_mpi"
check "$work/good" || { cat "$work/log"; exit 1; }
grep -q "checked: 2 binaries" "$work/log" || { cat "$work/log"; exit 1; }

# Another libnccl.so.2 that defines a function Weft lacks; a program using it.
mkdir -p "$work/other" "$work/bad"
echo 'int ncclNotInWeft(void) { return 0; }' >"$work/other/other.c"
cc -shared -fPIC -Wl,-soname,libnccl.so.2 "$work/other/other.c" -o "$work/other/libnccl.so.2"
ln -s libnccl.so.2 "$work/other/libnccl.so"
echo 'int ncclNotInWeft(void); int main(void) { return ncclNotInWeft(); }' >"$work/bad/main.c"
cc "$work/bad/main.c" -L"$work/other" -lnccl -o "$work/bad/sendrecv_perf"
if check "$work/bad"; then cat "$work/log"; echo "a binary needing ncclNotInWeft passed"; exit 1; fi
grep -q "needs nccl symbols Weft lacks: ncclNotInWeft" "$work/log" || { cat "$work/log"; exit 1; }

# A run path to the other library wins over LD_LIBRARY_PATH only as DT_RPATH.
cc "$work/bad/main.c" -L"$work/other" -lnccl -Wl,--disable-new-dtags,-rpath,"$work/other" -o "$work/bad/sendrecv_perf"
if check "$work/bad"; then cat "$work/log"; echo "a binary loading another libnccl.so.2 passed"; exit 1; fi
grep -q "loads libnccl.so.2 => $work/other/libnccl.so.2, not Weft's" "$work/log" || { cat "$work/log"; exit 1; }
echo "nccl-tests.sh accepts binaries on Weft and rejects the others"

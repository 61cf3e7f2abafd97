#!/usr/bin/env bash
# cmake --install gives the documented layout, and a program built against
# the installed tree with -I/-L/-lnccl runs.
# Usage: check_install.sh <build-dir> <source-dir>
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build=$1 src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/nccl.h include/weft.h lib/libweft.so lib/libnccl.so lib/libnccl.so.2; do
  [ -e "$prefix/$f" ] || { echo "missing $prefix/$f"; exit 1; }
done
cat >"$prefix/app.c" <<'C'
#include <nccl.h>
#include <weft.h>
#include <stdio.h>
int main(void) {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v != NCCL_VERSION_CODE) return 1;
  printf("installed %s\n", weftGetVersionString());
  return 0;
}
C
# A sanitizer build's library needs its runtime in the program too.
san=()
ldd "$prefix/lib/libweft.so" | grep -q libasan && san=(-fsanitize=address,undefined)
ldd "$prefix/lib/libweft.so" | grep -q libtsan && san=(-fsanitize=thread)
cc "${san[@]}" "$prefix/app.c" -I"$prefix/include" -L"$prefix/lib" -lnccl -Wl,-rpath,"$prefix/lib" -o "$prefix/app"
"$prefix/app"
# Not `ldd | grep -q`: grep quitting early would break ldd's pipe (pipefail).
libs=$(ldd "$prefix/app")
grep -q "$prefix/lib/" <<<"$libs" || { echo "app did not load the installed library:"; echo "$libs"; exit 1; }
echo "install OK"

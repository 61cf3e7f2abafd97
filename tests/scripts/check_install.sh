#!/usr/bin/env bash
# cmake --install gives the documented layout, install_manifest.txt lists
# every file and link it wrote, and the tree works for a user's programs and
# from its own bin/ (check_consumers.sh).
# Usage: check_install.sh <build-dir> <source-dir> [nvidia-lib-dir]
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build=$1 src=$2 nvidia=${3:-}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
ncclVersion=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$src/include/nccl.h")
for f in include/nccl.h include/weft.h "lib/libnccl.so.$ncclVersion" lib/libnccl.so.2 lib/libnccl.so lib/libweft.so \
         lib/cmake/NCCL/NCCLConfig.cmake lib/cmake/NCCL/NCCLConfigVersion.cmake lib/cmake/Weft/WeftConfig.cmake \
         lib/cmake/Weft/WeftConfigVersion.cmake lib/cmake/Weft/WeftTargets.cmake lib/pkgconfig/nccl.pc \
         lib/pkgconfig/weft.pc bin/weft-demo bin/weft-perf bin/weft-topo bin/weft-params bin/weft-sim bin/weft-tune share/doc/weft/LICENSE; do
  [ -e "$prefix/$f" ] || { echo "missing $prefix/$f"; exit 1; }
done
# One real library file; every other name is a link to it.
[ ! -L "$prefix/lib/libnccl.so.$ncclVersion" ]
for link in libnccl.so.2 libnccl.so libweft.so; do
  [ -L "$prefix/lib/$link" ] && [ "$(readlink -f "$prefix/lib/$link")" = "$prefix/lib/libnccl.so.$ncclVersion" ] ||
    { echo "$prefix/lib/$link is not a link to libnccl.so.$ncclVersion"; exit 1; }
done
soname=$(readelf -d "$prefix/lib/libnccl.so.2" | awk '/SONAME/ {print $5}')
[ "$soname" = "[libnccl.so.2]" ] || { echo "SONAME is $soname, not [libnccl.so.2]"; exit 1; }

# The manifest names exactly what is in the tree.
written=$(cd "$prefix" && find . -type f -o -type l | sed "s|^\.|$prefix|" | sort)
listed=$(sort "$build/install_manifest.txt")
if [ "$written" != "$listed" ]; then
  echo "install_manifest.txt differs from what was installed (< written, > listed):"
  diff <(echo "$written") <(echo "$listed") || true
  exit 1
fi
echo "install layout OK: $(wc -l <<<"$written") files and links, all in install_manifest.txt"
"$src/tests/scripts/check_consumers.sh" "$prefix" "$src" $nvidia

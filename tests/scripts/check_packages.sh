#!/usr/bin/env bash
# The Debian packages as a user gets them: cpack builds them from a built
# tree; their files all lie under /opt/weft (never on a path NVIDIA's
# libnccl2 / libnccl-dev own); -dev depends on the runtime of the same
# version; apt can install them (simulated); and, unpacked with dpkg-deb -x
# into an empty directory, that directory alone serves check_consumers.sh
# (CMake and pkg-config consumers, the tools, and the same program on
# NVIDIA's libnccl.so.2 by LD_LIBRARY_PATH).
# Usage: check_packages.sh <build-dir> <source-dir> [nvidia-lib-dir]
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) nvidia=${3:-}
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB >"$build/cpack.log" 2>&1) || { cat "$build/cpack.log"; exit 1; }
runtime=$(ls "$build"/packages/libweft-nccl2_*.deb)
dev=$(ls "$build"/packages/libweft-nccl-dev_*.deb)
for deb in "$runtime" "$dev"; do
  echo "$(basename "$deb"): $(du -h "$deb" | cut -f1)"
  outside=$(dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '^\./opt/weft/' | grep -vxE '\./|\./opt/' || true)
  [ -z "$outside" ] || { echo "$deb installs outside /opt/weft:"; echo "$outside"; exit 1; }
done
version=$(dpkg-deb -f "$runtime" Version)
dpkg-deb -f "$dev" Depends | grep -q "libweft-nccl2 (= $version)" ||
  { echo "libweft-nccl-dev does not depend on libweft-nccl2 (= $version): $(dpkg-deb -f "$dev" Depends)"; exit 1; }
if command -v apt-get >/dev/null; then
  apt-get install -s "$runtime" "$dev" >"$build/apt-simulate.log" 2>&1 || { cat "$build/apt-simulate.log"; exit 1; }
  grep -q '^Inst libweft-nccl-dev' "$build/apt-simulate.log" || { cat "$build/apt-simulate.log"; exit 1; }
  echo "apt-get install -s: installable (depends: $(dpkg-deb -f "$runtime" Depends))"
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$runtime" "$root"
dpkg-deb -x "$dev" "$root"
"$src/tests/scripts/check_consumers.sh" "$root/opt/weft" "$src" $nvidia

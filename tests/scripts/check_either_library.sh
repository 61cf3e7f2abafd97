#!/usr/bin/env bash
# A program built against Weft (tests/consumer/consumer.c linked to Weft's
# library, run path to it) records libnccl.so.2, never a Weft name; it runs
# on Weft's library; and with LD_LIBRARY_PATH naming NVIDIA's directory it
# loads NVIDIA's libnccl.so.2 instead and reports NVIDIA's version (only
# ncclGetVersion is called: that it loads and answers is the point). Exit 77
# (skipped) when there is no NVIDIA library.
# Usage: check_either_library.sh <program> <weft-lib-dir> <nvidia-lib-dir>
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
program=$1 weft=$2 nvidia=$3
unset LD_LIBRARY_PATH
needed=$(readelf -d "$program" | awk '/NEEDED/ {print $5}' | tr -d '[]')
grep -qx libnccl.so.2 <<<"$needed" || { echo "$program does not record libnccl.so.2: $needed"; exit 1; }
if grep -q weft <<<"$needed"; then echo "$program records a Weft name: $needed"; exit 1; fi

out=$(WEFT_BACKEND=host "$program")
echo "on Weft's library: $out"
[ "$(readlink -f "${out##* from }")" = "$(readlink -f "$weft/libnccl.so.2")" ] || { echo "loaded the wrong library"; exit 1; }
read -r weftVersion _ <<<"$("$program" --version)"

if [ ! -e "$nvidia/libnccl.so.2" ]; then
  echo "no NVIDIA libnccl.so.2 in $nvidia: the other direction is not checked"
  exit 77
fi
read -r version loaded <<<"$(LD_LIBRARY_PATH=$nvidia "$program" --version)"
echo "with LD_LIBRARY_PATH=$nvidia: version $version from $loaded"
[ "$(readlink -f "$loaded")" = "$(readlink -f "$nvidia/libnccl.so.2")" ] || { echo "did not load NVIDIA's library"; exit 1; }
[ "$version" != "$weftVersion" ] || { echo "NVIDIA's library reports Weft's version $version"; exit 1; }

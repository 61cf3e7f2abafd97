#!/usr/bin/env bash
# The library exports exactly the API: nccl*, pnccl* and weft* functions;
# every function nccl.h declares exists both as ncclX and pncclX.
# Usage: check_exports.sh <libnccl.so.2> <include/nccl.h>
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbVvi]$/ {print $3}' | sed 's/@.*//' | sort -u)
stray=$(grep -vE '^(p?nccl|weft)[A-Z]' <<<"$exported" || true)
if [ -n "$stray" ]; then
  echo "exports outside the API:"; echo "$stray"; exit 1
fi
declared=$(grep -oE '\bnccl[A-Z][A-Za-z0-9]*\s*\(' "$header" | tr -d ' (' | sort -u)
missing=0
for f in $declared; do
  for name in "$f" "p$f"; do
    grep -qx "$name" <<<"$exported" || { echo "missing export: $name"; missing=1; }
  done
done
[ $missing = 0 ] || exit 1
echo "exports OK: $(echo "$declared" | wc -l) functions declared, $(echo "$exported" | wc -l) symbols exported"

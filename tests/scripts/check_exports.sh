#!/usr/bin/env bash
# The library exports exactly the API: nccl*, pnccl* and weft* functions;
# every function nccl.h declares exists both as ncclX and pncclX. With a
# second header (NVIDIA's current nccl.h), every function that one declares
# must be exported too, so that a program built against it loads.
# Usage: check_exports.sh <libnccl.so.2> <include/nccl.h> [nvidia/nccl.h]
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
lib=$1 header=$2 newer=${3:-}
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbVvi]$/ {print $3}' | sed 's/@.*//' | sort -u)
stray=$(grep -vE '^(p?nccl|weft)[A-Z]' <<<"$exported" || true)
if [ -n "$stray" ]; then
  echo "exports outside the API:"; echo "$stray"; exit 1
fi
# Function declarations: a return type, then the name and its parenthesis
# (comments mentioning a name are not declarations).
declarations() {
  grep -oE '^\s*(ncclResult_t|const char\s*\*|void)\s+nccl[A-Z][A-Za-z0-9]*\s*\(' "$1" |
    grep -oE 'nccl[A-Z][A-Za-z0-9]*\s*\($' | tr -d ' (' | sort -u
}
declared=$(declarations "$header")
if [ -n "$newer" ]; then
  [ -f "$newer" ] || { echo "no header at $newer"; exit 1; }
  declared=$(printf '%s\n%s\n' "$declared" "$(declarations "$newer")" | sort -u)
fi
missing=0
for f in $declared; do
  for name in "$f" "p$f"; do
    grep -qx "$name" <<<"$exported" || { echo "missing export: $name"; missing=1; }
  done
done
[ $missing = 0 ] || exit 1
echo "exports OK: $(echo "$declared" | wc -l) functions declared, $(echo "$exported" | wc -l) symbols exported"

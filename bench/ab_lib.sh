#!/usr/bin/env bash
# Two builds of the library side by side: the same weft-perf binary (this
# build's) runs against library A and library B in alternating rounds (the
# order swapped every round), and the table gives, per size, the median over
# the rounds of each run's out-of-place time and the ratio B/A. For "did this
# change make X slower": A is the build before the change (any older Weft
# exports the symbols weft-perf needs), B the build after. The libraries
# are loaded through LD_LIBRARY_PATH, which wins over weft-perf's RUNPATH;
# each run's first line says which one was loaded. A benchmark, never a test.
#
# Usage: bench/ab_lib.sh LIBDIR_A LIBDIR_B [-- weft-perf arguments]
#   ROUNDS   rounds (default 7); BUILD  where weft-perf is (default build)
#   default arguments: allreduce -np 2 -b 8 -e 8 -n 2000 -w 200 -c 0 -a 3
#   (--median and --csv are added)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
libA=$(realpath "$1") libB=$(realpath "$2")
shift 2
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(allreduce -np 2 -b 8 -e 8 -n 2000 -w 200 -c 0 -a 3)
perf=${BUILD:-build}/bin/weft-perf
rounds=${ROUNDS:-7}
for lib in "$libA" "$libB"; do
  [ -e "$lib/libnccl.so.2" ] || { echo "ab_lib: no libnccl.so.2 in $lib" >&2; exit 2; }
  loaded=$(LD_LIBRARY_PATH=$lib ldd "$perf" | awk '/libnccl.so.2/ {print $3}')
  [ "$(realpath "$loaded")" = "$(realpath "$lib/libnccl.so.2")" ] ||
    { echo "ab_lib: $perf loads $loaded, not $lib's library" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WEFT_BACKEND=${WEFT_BACKEND:-host}
run() {  # tag, libdir: appends "bytes time" lines to $tmp/tag
  LD_LIBRARY_PATH=$2 "$perf" "${args[@]}" --median --csv 2>/dev/null |
    awk -F, '$2 ~ /^[0-9]+$/ {print $2, $7}' >>"$tmp/$1"
}
for ((r = 0; r < rounds; r++)); do
  if ((r % 2 == 0)); then run A "$libA"; run B "$libB"; else run B "$libB"; run A "$libA"; fi
done
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }
echo "A: $libA"
echo "B: $libB"
echo "weft-perf ${args[*]} --median, $rounds rounds alternating, out-of-place time (us): median over rounds [min-max]"
echo
echo "| bytes | A | B | B/A |"
echo "|---:|---:|---:|---:|"
for b in $(awk '{print $1}' "$tmp/A" | sort -un); do
  a=$(awk -v b="$b" '$1 == b {print $2}' "$tmp/A" | median)
  bb=$(awk -v b="$b" '$1 == b {print $2}' "$tmp/B" | median)
  ra=$(awk -v b="$b" '$1 == b {print $2}' "$tmp/A" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {print lo "-" hi}')
  rb=$(awk -v b="$b" '$1 == b {print $2}' "$tmp/B" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {print lo "-" hi}')
  echo "| $b | $a [$ra] | $bb [$rb] | $(awk -v a="$a" -v b="$bb" 'BEGIN {printf "%.3f", b / a}') |"
done

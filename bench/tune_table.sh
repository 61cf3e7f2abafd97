#!/usr/bin/env bash
# The planner's choice against the best measured choice (a benchmark, never a
# test): for 2 and 4 ranks as processes of this host (host backend), every
# AllReduce algorithm x protocol forced (NCCL_ALGO / NCCL_PROTO), then the
# model's own choice (both unset) with the built-in figures and with a
# tuning file weft-tune wrote on this machine. weft-perf allreduce, float
# sum, -a 3 --median: the slowest rank's median, out of place, microseconds.
# Prints one markdown table per rank count: size, the best measured
# algorithm/protocol and its time, the model's choice, its time in the
# forced sweep, their ratio and whether it is within 10 %, and the time of
# the model's own run (docs/performance.md).
#   Usage: bench/tune_table.sh [build-dir]
#   RANKS   rank counts (default "2 4")
#   MAXB    largest size (default 64M; sizes 8 B up, factor 8, plus MAXB)
#   ITERS   timed iterations per size (default 20), RUNS rounds (default 1;
#           the median of the rounds is kept)
#   TUNING_FILE  use this file instead of running weft-tune
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ranks=${RANKS:-"2 4"}
maxb=${MAXB:-64M}
iters=${ITERS:-20}
runs=${RUNS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WEFT_BACKEND=host
unset NCCL_ALGO NCCL_PROTO WEFT_TUNING_FILE NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE

tuning=${TUNING_FILE:-}
if [ -z "$tuning" ]; then
  tuning=$tmp/tuning.txt
  "$build/bin/weft-tune" -o "$tuning" >&2
fi

bytes_of() { numfmt --from=iec "$1"; }
max=$(bytes_of "$maxb")
sizes=""
for ((b = 8; b < max; b *= 8)); do sizes+="$b "; done
sizes+="$max"
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
value() { [ -f "$tmp/$1" ] && awk -v b="$2" '$1 == b {print $2}' "$tmp/$1" | median || echo "-"; }
sweep() {  # hi, then weft-perf args: runs 8 B .. hi (factor 8), and max alone when it is beyond the sweep
  local hi=$1; shift
  "$build/bin/weft-perf" allreduce -b 8 -e "$hi" -f 8 "$@"
  local last=8
  while [ $((last * 8)) -le "$hi" ]; do last=$((last * 8)); done
  if [ "$hi" -eq "$max" ] && [ "$last" -ne "$max" ]; then "$build/bin/weft-perf" allreduce -b "$max" -e "$max" "$@"; fi
}
perf() {  # name, max bytes, then weft-perf args: appends "bytes us" per size
  local name=$1 hi=$2; shift 2
  sweep "$hi" -n "$iters" -w 2 -c 0 -a 3 --median "$@" | awk '/^ *[0-9]/ {print $1, $6}' >>"$tmp/$name"
}
# The model's choice per size, from rank 0's TUNING log: "Algo/Proto".
choices() {  # name, env...: writes "bytes Algo/Proto" lines to $tmp/$name.choice
  local name=$1; shift
  (
    if [ $# -gt 0 ]; then export "$@"; fi
    export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_DEBUG_FILE="$tmp/log.%p"
    sweep "$max" -n 1 -w 0 -c 0 -np "$n" >/dev/null
  )
  for b in $sizes; do
    local algo proto
    # (no protocol line: an algorithm that runs Simple only)
    algo=$(cat "$tmp"/log.* | grep -o "AllReduce $b bytes: [A-Za-z0-9]*" | head -1 | awk '{print $4}' || true)
    proto=$(cat "$tmp"/log.* | grep -o "AllReduce $b bytes, [A-Za-z0-9]*: protocol [A-Za-z0-9]*" | head -1 |
      awk '{print $NF}' || true)
    echo "$b ${algo:-?}/${proto:-Simple}" >>"$tmp/$name.choice"
  done
  rm -f "$tmp"/log.*
}

combos="Ring/Simple Ring/LL Tree/Simple Tree/LL OneShot/Simple OneShot/LL Butterfly/Simple HalvingDoubling/Simple"
for ((r = 0; r < runs; r++)); do
  for n in $ranks; do
    for c in $combos; do
      algo=${c%/*} proto=${c#*/} hi=$max
      if [ "$algo" = OneShot ]; then
        [ "$n" -le 4 ] || continue
        hi=262144  # beyond it NCCL_ALGO=OneShot runs the ring
      fi
      [ "$proto" = LL ] && [ "$hi" -gt 2097152 ] && hi=2097152  # LL is 10x slower long before
      NCCL_ALGO=allreduce:$algo NCCL_PROTO=$proto perf "$n.${c/\//_}" "$hi" -np "$n"
    done
    perf "$n.model" "$max" -np "$n"
    WEFT_TUNING_FILE=$tuning perf "$n.file" "$max" -np "$n"
  done
done
for n in $ranks; do
  choices "$n.model"
  choices "$n.file" WEFT_TUNING_FILE="$tuning"
done

within() { awk -v m="$1" -v b="$2" 'BEGIN {r = m / b; printf "%.2f | %s", r, (r <= 1.10 ? "yes" : "no")}'; }
for n in $ranks; do
  echo
  echo "#### AllReduce, $n ranks (processes; us, slowest rank's median)"
  echo
  echo "| bytes | best measured | model's choice (built-in figures) | its forced run | ratio | within 10 % | its own run | model's choice (weft-tune file) | its forced run | ratio | within 10 % | its own run |"
  echo "|---:|:--|:--|---:|---:|:--|---:|:--|---:|---:|:--|---:|"
  for b in $sizes; do
    best=-; bestv=1e30
    for c in $combos; do
      v=$(value "$n.${c/\//_}" "$b")
      [ "$v" = - ] && continue
      if awk -v a="$v" -v m="$bestv" 'BEGIN {exit !(a < m)}'; then best=$c; bestv=$v; fi
    done
    row="| $b | $best $bestv"
    for m in model file; do
      own=$(value "$n.$m" "$b")
      which=$(awk -v b="$b" '$1 == b {print $2}' "$tmp/$n.$m.choice" 2>/dev/null | head -1)
      # The choice is judged by its run in the forced sweep (the same
      # algorithm, protocol and channels, measured beside the others), so
      # that run-to-run spread of one configuration is not read as a wrong
      # choice; a choice outside the sweep is judged by its own run.
      forced=-
      case " $combos " in *" ${which:-?} "*) forced=$(value "$n.${which/\//_}" "$b") ;; esac
      judged=$forced
      [ "$judged" = - ] && judged=$own
      if [ "$judged" = - ] || [ "$best" = - ]; then
        row+=" | ${which:-?} | $forced | - | - | $own"
      else
        row+=" | ${which:-?} | $forced | $(within "$judged" "$bestv") | $own"
      fi
    done
    echo "$row |"
  done
done
echo
echo "Tuning file used (weft-tune on this machine):"
echo
sed 's/^/    /' "$tuning"

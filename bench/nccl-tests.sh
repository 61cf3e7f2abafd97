#!/usr/bin/env bash
# Builds NVIDIA's nccl-tests against Weft's include/nccl.h and libnccl, proves
# every binary resolves libnccl.so.2 and each nccl* symbol it uses to Weft,
# and, where a CUDA device is usable, runs every *_perf binary:
#   - one rank (-g 1), all sizes 8 B .. 1 GiB, with the data check (-c 1);
#   - several ranks on GPU 0 (-np 2 and 4 under mpirun, NCCL_TESTS_DEVICE=0),
#     which needs the MPI build and, across processes, MPS (docs/architecture.md);
#   - bench/gpu_ranks_bench: 2 and 4 ranks (threads) on GPU 0, allreduce busbw
#     next to the device-to-device copy bandwidth (the limit).
# With --compare, the one-rank 8 B latency and 1 GiB bandwidth are measured
# again with the same binaries against the libnccl that ships with CUDA.
#
# usage: bench/nccl-tests.sh NCCL_TESTS_SRC [--build-dir DIR] [--out DIR]
#                            [--arch SM] [--compare] [--build-only]
# NCCL_TESTS_SRC is a checkout of github.com/NVIDIA/nccl-tests (not part of
# Weft: bring it yourself). Results: OUT/*.log, OUT/summary.txt.
#
# The trap this avoids: /usr/local/cuda/include has NVIDIA's nccl.h and
# /usr/local/cuda/lib64 (and ld.so's cache) its libnccl.so. nccl-tests puts
# -L$CUDA_LIB before -L$NCCL_HOME/lib, so CUDA_LIB here points at a folder
# holding only libcudart, and every run sets LD_LIBRARY_PATH to Weft's lib.
set -euo pipefail
src=${1:?usage: bench/nccl-tests.sh NCCL_TESTS_SRC [options]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=$root/build/nccl-tests
arch=90
compare=0
buildOnly=0
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(cd "$2" && pwd); shift 2 ;;
    --out) mkdir -p "$2"; out=$(cd "$2" && pwd); shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --compare) compare=1; shift ;;
    --build-only) buildOnly=1; shift ;;
    *) echo "nccl-tests.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
cuda=${CUDA_HOME:-/usr/local/cuda}
weftLib=$build/lib
[ -e "$weftLib/libnccl.so.2" ] || { echo "nccl-tests.sh: no $weftLib/libnccl.so.2: build Weft first" >&2; exit 1; }
mkdir -p "$out"
stage=$out/stage
rm -rf "$stage"
mkdir -p "$stage/include" "$stage/lib" "$stage/cudalib"
ln -s "$root/include/nccl.h" "$stage/include/nccl.h"
ln -s "$weftLib"/libnccl.so* "$stage/lib/"
ln -s "$cuda"/lib64/libcudart* "$stage/cudalib/"

# plain and mpi: built against Weft's nccl.h and libnccl. nvidia-header: built
# against the nccl.h and libnccl.so that ship with CUDA (a newer header), run
# with Weft's: the drop-in case, a binary nobody rebuilt.
builds=(plain nvidia-header)
command -v mpicc >/dev/null && builds+=(mpi)
for b in "${builds[@]}"; do
  args=(NCCL_HOME="$stage" CUDA_LIB="$stage/cudalib")
  [ "$b" = nvidia-header ] && args=(NCCL_HOME="$cuda" CUDA_LIB="$cuda/lib64")
  if [ "$b" = mpi ]; then
    # Debian's Open MPI keeps mpi.h and libmpi under one prefix.
    incdir=$(mpicc --showme:incdirs | awk '{print $1}')
    args+=(MPI=1 NAME_SUFFIX=_mpi MPI_HOME="$(dirname "$incdir")")
  fi
  echo "nccl-tests.sh: building nccl-tests ($b) into $out/$b" >&2
  make -C "$src/src" -j"$(nproc)" BUILDDIR="$out/$b" CUDA_HOME="$cuda" \
    NVCC_GENCODE="-gencode=arch=compute_$arch,code=sm_$arch" "${args[@]}" >&2
done
# The header the Weft builds compiled: nvcc puts CUDA's include folder (with
# NVIDIA's nccl.h) on every command line; -I must win over it.
header=$(echo '#include <nccl.h>' | "$cuda/bin/nvcc" -M -I"$stage/include" -x cu - | tr ' \\' '\n\n' | grep 'nccl\.h$')
[ "$(readlink -f "$header")" = "$root/include/nccl.h" ] ||
  { echo "nccl-tests.sh: nvcc -I$stage/include finds $header, not Weft's" >&2; exit 1; }

# Every binary: libnccl.so.2 from Weft, every nccl symbol defined by Weft.
nm -D --defined-only "$weftLib/libnccl.so.2" | awk '{print $3}' | sort -u >"$out/weft-symbols.txt"
bins=$(find "$out/plain" "$out/mpi" "$out/nvidia-header" -maxdepth 1 -name '*_perf*' -type f 2>/dev/null | sort)
[ -n "$bins" ] || { echo "nccl-tests.sh: no binaries built" >&2; exit 1; }
weftReal=$(readlink -f "$weftLib/libnccl.so.2")
bad=0
for bin in $bins; do
  # Linked through Weft's libnccl.so (a link to libweft.so.0), a binary needs
  # libweft.so.0; one linked against NVIDIA's needs libnccl.so.2. Either way
  # the one NCCL library it loads must be Weft's file.
  loaded=$(LD_LIBRARY_PATH=$weftLib ldd "$bin" | awk '$1 ~ /^lib(nccl|weft)\.so/ {print $3}')
  for lib in $loaded; do
    if [ "$(readlink -f "$lib")" != "$weftReal" ]; then
      echo "nccl-tests.sh: $bin loads $lib, not Weft's $weftReal" >&2
      bad=1
    fi
  done
  [ -n "$loaded" ] || { echo "nccl-tests.sh: $bin loads no NCCL library" >&2; bad=1; }
  missing=$(nm -D --undefined-only "$bin" | awk '{print $2}' | grep -E '^p?nccl' | sed 's/@.*//' | sort -u |
    comm -23 - "$out/weft-symbols.txt")
  if [ -n "$missing" ]; then
    echo "nccl-tests.sh: $bin needs nccl symbols Weft lacks: $missing" >&2
    bad=1
  fi
done
count=$(echo "$bins" | wc -l)
used=$(for bin in $bins; do nm -D --undefined-only "$bin" | awk '{print $2}'; done | grep -E '^nccl' | sort -u | tr '\n' ' ')
echo "linked: $count binaries against $weftReal; nccl symbols used: $used" |
  tee "$out/summary.txt"
[ $bad = 0 ] || exit 1
[ $buildOnly = 1 ] && exit 0

if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; }; then
  echo "nccl-tests.sh: no usable CUDA device: built and linked only" | tee -a "$out/summary.txt"
  exit 0
fi

# Lines of nccl-tests' output: the data rows and the '# Avg bus bandwidth' line.
summarize() {  # name log
  local wrong
  wrong=$(awk '!/^#/ && NF >= 13 {w += $9 + $13} END {print w + 0}' "$2")
  echo "$1: #wrong total $wrong; $(grep -h 'Avg bus bandwidth' "$2" | tr -s ' ')" | tee -a "$out/summary.txt"
}
runOne() {  # name lib cmd...
  local name=$1 lib=$2
  shift 2
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@" >"$out/$name.log" 2>&1 || echo "$name: exit $?" | tee -a "$out/summary.txt"
  summarize "$name" "$out/$name.log"
}
for bin in $(find "$out/plain" -maxdepth 1 -name '*_perf' -type f | sort); do
  coll=$(basename "$bin" _perf)
  runOne "weft-1rank-$coll" "$weftLib" "$bin" -b 8 -e 1G -f 4 -g 1 -c 1 -w 5 -n 20
  if [ -x "$out/mpi/${coll}_perf_mpi" ]; then
    for np in 2 4; do
      runOne "weft-${np}ranks-gpu0-$coll" "$weftLib" mpirun --allow-run-as-root --oversubscribe -np "$np" \
        -x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE=0 "$out/mpi/${coll}_perf_mpi" -b 8 -e 256M -f 4 -g 1 -c 1 -w 5 -n 20
    done
  fi
done
# The limit for several ranks on one GPU: device-to-device copy bandwidth,
# next to Weft's allreduce busbw (threads, one rank each; bench/gpu_ranks_bench.cc).
for np in 2 4; do
  "$build/bin/gpu_ranks_bench" "$np" 20 >"$out/gpu-ranks-$np.log" 2>&1 || echo "gpu_ranks_bench $np: exit $?"
  echo "gpu_ranks_bench $np ranks: $(tail -1 "$out/gpu-ranks-$np.log")" | tee -a "$out/summary.txt"
done
if [ $compare = 1 ]; then
  for lib in "$weftLib" "$cuda/lib64"; do
    tag=$([ "$lib" = "$weftLib" ] && echo weft || echo nvidia)
    runOne "$tag-latency-all_reduce" "$lib" "$out/plain/all_reduce_perf" -b 8 -e 8 -g 1 -c 0 -w 100 -n 1000
    runOne "$tag-bandwidth-all_reduce" "$lib" "$out/plain/all_reduce_perf" -b 1G -e 1G -g 1 -c 0 -w 5 -n 20
  done
fi

#!/usr/bin/env bash
# Real separate hosts on one machine: N network namespaces, each with its own
# veth interface and private address (10.251.0.<rank+1>/24), joined by a
# bridge in a switch namespace. One weft-perf rank per namespace, unique id
# through a file, bootstrap and every byte crossing the veth links; each rank
# claims its own host (NCCL_HOSTID) and uses only its veth (NCCL_SOCKET_IFNAME).
# weft-perf checks every result (#wrong); any wrong value or error fails.
#
#   netns_hosts.sh WEFT_PERF [NRANKS]
# Exit 77 (skipped) when not root or namespaces are unavailable.
set -uo pipefail
perf=$1
n=${2:-3}
if [ "$(id -u)" != 0 ]; then echo "SKIPPED: network namespaces need root"; exit 77; fi
command -v ip >/dev/null || { echo "SKIPPED: iproute2 (ip) is not installed"; exit 77; }
tag="w$$"  # unique per run: concurrent runs never share names
sw="${tag}sw"
cleanup() {
  for ((i = 0; i < n; i++)); do ip netns del "${tag}h$i" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  rm -rf "$work"
}
work=$(mktemp -d)
trap cleanup EXIT
if ! ip netns add "$sw" 2>"$work/err"; then echo "SKIPPED: cannot create a network namespace: $(cat "$work/err")"; exit 77; fi
set -e
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
for ((i = 0; i < n; i++)); do
  ns="${tag}h$i"
  ip netns add "$ns"
  ip link add "${tag}e$i" type veth peer name "${tag}p$i"
  ip link set "${tag}e$i" netns "$ns"
  ip link set "${tag}p$i" netns "$sw"
  ip -n "$sw" link set "${tag}p$i" master br0 up
  ip -n "$ns" addr add "10.251.0.$((i + 1))/24" dev "${tag}e$i"
  ip -n "$ns" link set "${tag}e$i" up
  ip -n "$ns" link set lo up
done
set +e
echo "netns: $n hosts ${tag}h0..$((n - 1)) on 10.251.0.0/24"
status=0
for coll in allreduce allgather reducescatter broadcast alltoall; do
  for algo in Ring Tree; do
    [ "$coll" != allreduce ] && [ "$algo" = Tree ] && continue
    rm -f "$work/id"
    pids=()
    for ((i = 0; i < n; i++)); do
      ip netns exec "${tag}h$i" env RANK="$i" WORLD_SIZE="$n" NCCL_HOSTID="${tag}h$i" NCCL_SOCKET_IFNAME="=${tag}e$i" \
        NCCL_ALGO=$algo WEFT_TIMEOUT=60 WEFT_BOOTSTRAP_TIMEOUT=60 \
        "$perf" "$coll" -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 --id-file "$work/id" >"$work/out$i" 2>&1 &
      pids+=($!)
    done
    for ((i = 0; i < n; i++)); do wait "${pids[$i]}" || status=1; done
    if ! grep -q "Out of bounds values : 0 OK" "$work/out0"; then status=1; fi
    echo "== $coll ($algo): rank 0 output"
    cat "$work/out0"
    if [ $status != 0 ]; then
      for ((i = 1; i < n; i++)); do echo "== rank $i"; cat "$work/out$i"; done
      exit 1
    fi
  done
done
# Without a shared file system: every host gets a private /tmp, and the
# ranks meet at rank 0's address (NCCL_COMM_ID), with rank and size from a
# launcher's variables (Open MPI's, PMI's and Slurm's, one family per rank).
launcher_env() {  # rank -> "NAME=rank NAME=size"
  case $(($1 % 3)) in
    0) echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=$n" ;;
    1) echo "PMI_RANK=$1 PMI_SIZE=$n" ;;
    2) echo "SLURM_PROCID=$1 SLURM_NTASKS=$n" ;;
  esac
}
# A build tree under /tmp (a checkout there) is put back at its own path
# over the private /tmp, through a bind mount made before it; the mounts stay
# inside the namespace's own mount table (ip netns exec makes it a slave).
keep=""
case $(realpath "$perf") in /tmp/*) keep=$(dirname "$(dirname "$(realpath "$perf")")") ;; esac
if [ -n "$keep" ]; then mkdir -p /run/weft-netns-keep; fi
# shellcheck disable=SC2016  # expanded by the namespace's own shell
privateTmp='if [ -n "$KEEP" ]; then mount --bind "$KEEP" /run/weft-netns-keep || exit 1; fi
mount -t tmpfs tmpfs /tmp || exit 1
if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && mount --bind /run/weft-netns-keep "$KEEP" || exit 1; fi
exec "$@"'
pids=()
for ((i = 0; i < n; i++)); do
  # shellcheck disable=SC2046  # the variables split into words on purpose
  ip netns exec "${tag}h$i" env KEEP="$keep" sh -c "$privateTmp" sh \
    env $(launcher_env $i) NCCL_COMM_ID=10.251.0.1:29555 NCCL_HOSTID="${tag}h$i" NCCL_SOCKET_IFNAME="=${tag}e$i" \
    WEFT_TIMEOUT=60 WEFT_BOOTSTRAP_TIMEOUT=60 "$perf" allreduce -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 >"$work/env$i" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < n; i++)); do wait "${pids[$i]}" || status=1; done
echo "== allreduce, NCCL_COMM_ID and private /tmp per host: rank 0 output"
cat "$work/env0"
if [ $status != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$work/env0"; then
  for ((i = 1; i < n; i++)); do echo "== rank $i"; cat "$work/env$i"; done
  exit 1
fi
echo "netns: every collective passed across $n namespaces"

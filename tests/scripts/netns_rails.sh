#!/usr/bin/env bash
# Rails on real interfaces: two hosts (network namespaces), each with two
# interfaces, rail a and rail b, each rail a point-to-point veth pair between
# the hosts (10.253.1.0/24 and 10.253.2.0/24), as on a rail-optimised
# cluster where NIC i of every host is on switch i. An allreduce with four
# channels runs across the hosts, and each interface's tx_bytes (read inside
# its namespace) says which rails carried the data:
#   1. both interfaces selected: each carried at least a quarter of the host's bytes;
#   2. NCCL_SOCKET_IFNAME naming rail a only: rail b carried (almost) nothing.
# Ring and Tree. weft-perf checks every result.
#
#   netns_rails.sh WEFT_PERF
# Exit 77 (skipped) when not root or namespaces are unavailable.
set -uo pipefail
perf=$1
if [ "$(id -u)" != 0 ]; then echo "SKIPPED: network namespaces need root"; exit 77; fi
command -v ip >/dev/null || { echo "SKIPPED: iproute2 (ip) is not installed"; exit 77; }
tag="wrails$$"  # unique per run; interface names stay within 15 characters
bytes=$((32 * 1024 * 1024))
work=$(mktemp -d)
cleanup() {
  ip netns del "${tag}h0" 2>/dev/null
  ip netns del "${tag}h1" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "${tag}h0" 2>"$work/err"; then echo "SKIPPED: cannot create a network namespace: $(cat "$work/err")"; exit 77; fi
set -e
ip netns add "${tag}h1"
net=1
for rail in a b; do  # rail a first: the interface the bootstrap picks
  ip link add "${tag}${rail}0" netns "${tag}h0" type veth peer name "${tag}${rail}1" netns "${tag}h1"
  for h in 0 1; do
    ip -n "${tag}h$h" addr add "10.253.$net.$((h + 1))/24" dev "${tag}${rail}$h"
    ip -n "${tag}h$h" link set "${tag}${rail}$h" up
  done
  net=$((net + 1))
done
for h in 0 1; do ip -n "${tag}h$h" link set lo up; done
set +e

txOf() { ip netns exec "${tag}h$1" cat "/sys/class/net/${tag}$2$1/statistics/tx_bytes"; }

# run NAME ALGO IFNAME_SPEC_OR_EMPTY: one allreduce across the hosts; leaves
# each interface's tx bytes during the run in $work/tx_<rail><host>.
run() {
  local name=$1 algo=$2 only=$3 status=0 pids=() before=()
  rm -f "$work/id"
  for h in 0 1; do for rail in a b; do before+=("$(txOf $h $rail)"); done; done
  for h in 0 1; do
    local ifenv=()
    [ -n "$only" ] && ifenv=(NCCL_SOCKET_IFNAME="=${tag}${only}$h")
    ip netns exec "${tag}h$h" env RANK=$h WORLD_SIZE=2 NCCL_HOSTID="${tag}h$h" "${ifenv[@]}" \
      NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4 NCCL_ALGO="$algo" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET,GRAPH \
      WEFT_TIMEOUT=60 WEFT_BOOTSTRAP_TIMEOUT=60 \
      "$perf" allreduce -b $bytes -e $bytes -n 4 -w 1 -c 1 --id-file "$work/id" >"$work/out$h" 2>&1 &
    pids+=($!)
  done
  for h in 0 1; do wait "${pids[$h]}" || status=1; done
  local i=0
  for h in 0 1; do for rail in a b; do
    echo $(($(txOf $h $rail) - before[i])) >"$work/tx_$rail$h"
    i=$((i + 1))
  done; done
  echo "== $name: tx bytes h0: a $(cat "$work/tx_a0") b $(cat "$work/tx_b0"); h1: a $(cat "$work/tx_a1") b $(cat "$work/tx_b1")"
  grep -h "via NET/" "$work/out0" | sed 's/^/   /'
  if [ $status != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$work/out0"; then
    echo "FAILED: $name: the run failed"; cat "$work/out0" "$work/out1"; exit 1
  fi
  # Every link on the device of the plan's NIC (the synthetic host's NICs
  # are the selected interfaces), none spread by channel number.
  for h in 0 1; do
    if [ "$(grep -c "via NET/Socket/.* the plan's NIC" "$work/out$h")" -lt 8 ] || grep -q "spread by channel" "$work/out$h"; then
      echo "FAILED: $name: host $h's links did not all use the plan's NIC"; cat "$work/out$h"; exit 1
    fi
  done
}

# Each host sent at least ~2 x bytes per iteration over the rails (ring:
# 2(n-1)/n of the buffer per rank; tree: the buffer up and down).
check_both() {
  for h in 0 1; do
    local a b total
    a=$(cat "$work/tx_a$h") b=$(cat "$work/tx_b$h") total=$(($(cat "$work/tx_a$h") + $(cat "$work/tx_b$h")))
    if [ "$total" -lt $((4 * bytes)) ]; then echo "FAILED: $1: host $h sent only $total bytes"; exit 1; fi
    if [ $((a * 4)) -lt "$total" ] || [ $((b * 4)) -lt "$total" ]; then
      echo "FAILED: $1: host $h's rails carried a $a and b $b bytes: one of them less than a quarter"; exit 1
    fi
  done
}

check_only_a() {
  for h in 0 1; do
    local a b
    a=$(cat "$work/tx_a$h") b=$(cat "$work/tx_b$h")
    if [ "$a" -lt $((4 * bytes)) ] || [ "$b" -gt $((a / 100)) ]; then
      echo "FAILED: $1: host $h: rail a carried $a bytes, rail b $b (expected rail a only)"; exit 1
    fi
  done
}

for algo in Ring Tree; do
  run "$algo over both rails" $algo ""
  check_both "$algo over both rails"
  run "$algo, NCCL_SOCKET_IFNAME rail a" $algo a
  check_only_a "$algo, NCCL_SOCKET_IFNAME rail a"
done
echo "netns rails: channels spread over both interfaces; NCCL_SOCKET_IFNAME kept them to one"

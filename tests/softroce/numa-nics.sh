#!/usr/bin/env bash
# Runs in a guest booted with `contrib/softroce-vm --numa 2 --ports 2`
# (tier.sh): two NUMA nodes, rxe0 on a virtio NIC behind a PCI expander
# bridge of node 0, rxe1 on one of node 1 (a GPU node's NIC per socket).
# btl/llrdma finds a Soft-RoCE device's place through its netdev (sysfs
# "parent"), so with the default policy (nearest) a rank bound to node i
# uses rxe i only; with policy all, both.  llrdma-check's per-rank device
# lines are the evidence; a verified ping-pong passes both ways (over vader
# when the ranks share no device, over btl/llrdma with policy all).
. ./tests/mpi/env.sh
T="$top_builddir/tests/softroce/t_threads"
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -lt 2 ] || [ ! -e /sys/class/infiniband/rxe1 ]; then
  echo "1..0 # SKIP needs contrib/softroce-vm --numa 2 --ports 2 ($nodes node(s))"
  exit 77
fi
P=(--map-by numa --bind-to numa --mca pml ob1 --mca mpi_yield_when_idle 1)

# numa_of DEV: the NUMA node of the PCI device behind DEV's netdev.
numa_of() {
  local nd dev
  nd=$(cat "/sys/class/infiniband/$1/parent") || return 1
  dev=$(readlink -f "/sys/class/net/$nd/device")
  cat "$dev/numa_node" 2>/dev/null || cat "$dev/../numa_node"
}
for i in 0 1; do
  n=$(numa_of rxe$i)
  check "rxe$i's NIC is on NUMA node $i (sysfs: $n)" test "$n" = "$i"
done

# rank R's lines of llrdma-check's table (up to the next rank or the plan).
rank_block() { awk -v r="$1" '$1 == r && NF > 5 { on = 1; print; next }
  on && (/^ +[0-9]+ +[^ ]/ && NF > 5 || /^coll\/llrdma/) { on = 0 } on' <<<"$out"; }
uses() { rank_block "$1" | grep -q "^ *$2 .* used, port"; }
skips() { rank_block "$1" | grep -q "^ *$2 .* not used"; }

launch -np 2 "${P[@]}" "$CHECK"
check_run "nearest: llrdma-check runs on 2 ranks bound one per NUMA node" has "all 2 ranks agree"
check_run "nearest: rank 0 uses rxe0 only" eval 'uses 0 rxe0 && skips 0 rxe1'
check_run "nearest: rank 1 uses rxe1 only" eval 'uses 1 rxe1 && skips 1 rxe0'
check_run "nearest: the reason is the NUMA node" \
  has "rxe1 .* NODE .* used, port 1 .* same NUMA node 1 as the rank"
launch -np 2 "${P[@]}" --mca btl self,vader,llrdma "$T" pingpong 20 1 8 4096 70000
check_pass "nearest: verified ping-pong (the ranks share no device: vader)" t_threads 2

launch -np 2 "${P[@]}" --mca btl_llrdma_device_policy all "$CHECK"
check_run "all: both ranks use both devices" \
  eval 'uses 0 rxe0 && uses 0 rxe1 && uses 1 rxe0 && uses 1 rxe1'
launch -np 2 "${P[@]}" --mca btl_llrdma_device_policy all --mca btl self,llrdma \
  "$T" pingpong 20 1 8 4096 70000
check_pass "all: verified ping-pong over btl/llrdma" t_threads 2
finish

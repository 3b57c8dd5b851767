#!/usr/bin/env bash
# MPI_Alltoall among FOUR nodes (`contrib/softroce-vm --nodes 4`, tier4.sh)
# over btl/llrdma: 8-byte blocks (the low-latency path, inline), hint-sized
# 8 KiB blocks at hint 8K and 64 KiB blocks (the bandwidth path), 20 calls
# each, every byte checked by the rank that receives it (t_alltoall).  One
# rank per node with only self and llrdma as BTLs, so every message crosses a
# guest link by RDMA; then two ranks per node (vader inside the node).  The
# connections are read from btl/llrdma's verbose lines: each node set up its
# own.
. "$(dirname "$0")/env.sh"
if [ "${SOFTROCE_VM_NODES:-1}" -lt 4 ]; then
  echo "1..0 # SKIP needs 4 nodes (contrib/softroce-vm --nodes 4)"
  exit 77
fi
TA="$top_builddir/tests/mpi/t_alltoall"
V=(--mca btl_llrdma_verbose 20 --mca btl_llrdma_size_hint 8K)
ONLY=(--hostfile "$SOFTROCE_VM_HOSTFILE" -x LD_LIBRARY_PATH -x LLRDMA_HELPDIR
  --mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)

launch -np 4 --map-by node "${ONLY[@]}" "${V[@]}" "$TA" 20 8 8192 65536
check_pass "4 x 1 rank, btl self,llrdma: 8 B, 8 KiB, 64 KiB blocks, 20 calls each" t_alltoall 4
check_run "4 x 1: every node set up btl/llrdma connections" across node0 node1 node2 node3
launch -np 8 --map-by node "${C[@]}" "${V[@]}" "$TA" 10 8 8192
check_pass "4 x 2 ranks (vader inside a node): 8 B and 8 KiB blocks, 10 calls each" t_alltoall 8
check_run "4 x 2: every node set up btl/llrdma connections" across node0 node1 node2 node3
finish

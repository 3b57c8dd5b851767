#!/usr/bin/env bash
# coll/llrdma Allreduce across two nodes (vader inside a node, btl/llrdma
# across): t_allreduce's op x datatype x count x in-place matrix on
# MPI_COMM_WORLD, on halves (rank % 2) and on a permuted copy.  2+2 ranks
# mapped by node: the halves each stay on one node; 3+1: one half spans the
# nodes, the other does not.  Spanning communicators run the hierarchical
# schedule, whose inter-node step takes btl/llrdma's RDMA writes (transport
# auto: every inter-node peer is reached through btl/llrdma); a short job
# with the PML transport is the control.  Every rank judges its own results.
. "$(dirname "$0")/env.sh"
TA="$top_builddir/tests/mpi/t_allreduce"
V=(--mca coll_llrdma_verbose 10 --mca btl_llrdma_verbose 20)
launch -np 4 --map-by node "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint 8K "$TA"
check_pass "2+2 ranks by node, hint 8K: matrix on world, node-local halves, permuted" t_allreduce 4
check_run "2+2: coll/llrdma ran" has "coll:llrdma: allreduce .* bytes"
check_run "2+2: btl/llrdma connections on both nodes" across node0 node1
check_run "2+2: inter-node step over btl/llrdma RDMA writes (auto)" \
  has "MPI_COMM_WORLD: inter-node transport btl (every inter-node peer"
launch -np 4 --host node0:3,node1:1 "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint 64K "$TA"
check_pass "3+1 ranks, hint 64K: matrix on world, a spanning and a node-local half" t_allreduce 4
check_run "3+1: coll/llrdma ran" has "coll:llrdma: allreduce .* bytes"
check_run "3+1: btl/llrdma connections on both nodes" across node0 node1
check_run "3+1: inter-node step over btl (auto)" has "hierarchical, .* in flight over btl;"
# Control: the PML transport, 2 calls of 1000 doubles on 2+2.
launch -np 4 --map-by node "${C[@]}" --mca coll_llrdma_verbose 10 \
  --mca coll_llrdma_internode_transport pml "$TA" --fault 0 1000
check_pass "2+2, transport pml (control): 1000 doubles verified" t_allreduce 4
check_run "control: over pml" has "hierarchical, .* in flight over pml;"
finish

#!/usr/bin/env bash
# coll/llrdma Allreduce on FOUR nodes (`contrib/softroce-vm --nodes 4`; not in
# the CI tier, which boots two: run by hand, docs/softroce.md "Four nodes").
# t_allreduce's suite (awkward counts, in place, every op on representative
# types, sub-communicators that span and do not span nodes, permuted ranks),
# every rank judging its own results (the op x datatype matrix on 8 ranks did
# not finish in 15 min on 4 one-vCPU guests of a 2-core host: not run here);
# the hierarchical schedule must be the one that ran (coll_llrdma_verbose 10):
#   - 4 x 2 ranks by node: 4 nodes, 2 slices, both local ranks busy; under
#     `auto` the communicator takes btl/llrdma's puts (every inter-node peer is
#     reached through it), then the same suite with the puts forced for every
#     call (the inter-node step's RDMA writes among four nodes);
#   - 4 x 1 rank, no hint: no arena, the inter-node step alone;
#   - 2+1+2+1 (irregular): one slice, the one-rank nodes move the whole vector.
. "$(dirname "$0")/env.sh"
if [ "${SOFTROCE_VM_NODES:-1}" -lt 4 ]; then
  echo "1..0 # SKIP needs 4 nodes (contrib/softroce-vm --nodes 4)"
  exit 77
fi
TA="$top_builddir/tests/mpi/t_allreduce"
V=(--mca coll_llrdma_verbose 10 --mca btl_llrdma_verbose 20)
hier() { has "MPI_COMM_WORLD: $1 ranks on 4 node(s), .*: hierarchical"; }
# over_btl: every hierarchical call, on any communicator, ran its inter-node
# step by btl_put (none over the PML).
over_btl() { has "hierarchical, .* in flight over btl;" && lacks "in flight over pml;"; }

launch -np 8 --map-by node "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint 8K "$TA"
check_pass "4 x 2 ranks by node, hint 8K: suite" t_allreduce 8
check_run "4 x 2: hierarchical on MPI_COMM_WORLD" hier 8
check_run "4 x 2: two slices, both local ranks busy" has ": hierarchical, 4 nodes, 2 slices"
check_run "4 x 2: btl/llrdma connections on all nodes" across node0 node1 node2 node3
check_run "4 x 2, auto: the communicator takes the put transport" \
  has "MPI_COMM_WORLD: inter-node transport btl "
launch -np 8 --map-by node "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint 64K \
  --mca coll_llrdma_internode_transport btl "$TA"
check_pass "4 x 2 ranks by node, hint 64K, transport btl: suite" t_allreduce 8
check_run "4 x 2, transport btl: every hierarchical call by btl_put" over_btl
launch -np 4 --map-by node "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint 0 "$TA"
check_pass "4 x 1 rank, no hint: suite" t_allreduce 4
launch -np 6 --host node0:2,node1:1,node2:2,node3:1 "${C[@]}" "${V[@]}" \
  --mca btl_llrdma_size_hint 8K "$TA"
check_pass "2+1+2+1 ranks, hint 8K: suite" t_allreduce 6
check_run "2+1+2+1: hierarchical with one slice" has ": hierarchical, 4 nodes, 1 slices"
finish

#!/usr/bin/env bash
# The hierarchical Allreduce on one host: coll_llrdma_node_split (tests only)
# makes groups of ranks count as nodes, each with its own shared-memory arena,
# the "inter-node" step going over the PML (vader here).  t_allreduce judges
# every rank's results against a reference it computes itself (never through
# an MPI_Allreduce): the suite (awkward counts, in place, ints, doubles
# bitwise equal on every rank, pair types, sub-communicators that span and
# do not span the groups, permuted ranks, fallbacks) and --matrix (every
# mapped datatype x every op defined on it).  Exit codes are checked.
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_allreduce"
V=(--mca coll_llrdma_verbose 10)

hier_on_world() { has "MPI_COMM_WORLD: $1 ranks on $2 node(s), .*: hierarchical" &&
  has ": hierarchical, $2 nodes, "; }
# 70001 one-byte elements on 2+2: two 35000-byte slices; with a 64K hint
# each is one recursive-doubling message, without one Rabenseifner (halves).
slice_by() { has "allreduce 70001 bytes .* hint $1: hierarchical, 2 nodes, 2 slices, inter-node $2 "; }
for layout in "4 3,1 2" "5 2,2,1 3" "4 2 2"; do
  set -- $layout
  if [ $2 != 2 ]; then
    launch -np $1 "${V[@]}" --mca coll_llrdma_node_split $2 "$T"
    check_pass "$2: suite" t_allreduce $1
    check_run "$2: hierarchical on MPI_COMM_WORLD ($3 nodes)" hier_on_world $1 $3
  fi
  launch -np $1 "${V[@]}" --mca coll_llrdma_node_split $2 "$T" --matrix
  check_pass "$2: op x datatype matrix" t_allreduce $1
  check_run "$2: matrix ran hierarchically" hier_on_world $1 $3
  case $2 in
  2) # From 8K both local ranks carry a slice across nodes.
    check_run "2+2: both local ranks busy (2 slices)" has ": hierarchical, 2 nodes, 2 slices"
    check_run "2+2, no hint: 35000-byte slices by Rabenseifner" slice_by 0 rabenseifner ;;
  2,2,1) # A one-rank node: one slice.
    check_run "2+2+1: one slice" lacks ": hierarchical, 3 nodes, 2 slices" ;;
  esac
done
launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 --mca btl_llrdma_size_hint 64K "$T" --matrix
check_pass "2+2, hint 64K: matrix" t_allreduce 4
check_run "2+2, hint 64K: 35000-byte slices in one message each" slice_by 65536 recursive_doubling

# The inter-node step's algorithm forced by the algorithm knob (shm_* ones
# are node-local and ignored there); recursive doubling ran above.
for alg in rabenseifner ring; do
  launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 --mca coll_llrdma_allreduce_algorithm $alg \
    --mca coll_llrdma_allreduce_segment_size 1K "$T"
  check_pass "2+2, inter-node $alg forced, 1K segments" t_allreduce 4
  check_run "2+2: inter-node $alg ran" has "inter-node $alg (forced by the algorithm knob)"
done

# The inter-node transport: over vader no rank reaches another through
# btl/llrdma RDMA, so auto takes the PML, and a forced btl is said (naming
# the peer) and takes it too.  The btl transport itself runs in the
# Soft-RoCE tier (tests/softroce/test-hier-btl.sh).
launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 "$T" --fault 0 1000
check_pass "2+2, transport auto over vader: 2 calls verified" t_allreduce 4
check_run "auto over vader: the PML" has "MPI_COMM_WORLD: inter-node transport pml (a rank has no"
launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 --mca coll_llrdma_internode_transport btl \
  "$T" --fault 0 1000
check_pass "2+2, transport btl forced over vader: 2 calls verified" t_allreduce 4
forced_btl() { has "coll_llrdma_internode_transport=btl, but rank 0 reaches its inter-node peer rank 2 without btl/llrdma RDMA" &&
  has "MPI_COMM_WORLD: inter-node transport pml" && lacks "in flight over btl"; }
check_run "forced btl over vader: said, naming the peer, and the PML taken" forced_btl

# llrdma-check shows the plan for the job's layout.
launch -np 4 --mca coll_llrdma_node_split 2 --mca btl_llrdma_size_hint 64K "$CHECK"
check_plan() { has "Allreduce plan for 4 ranks on 2 nodes (2+2), MPI_DOUBLE, coll hint 64K:" &&
  has "^  hierarchical: " && has "^  inter-node messages (coll_llrdma_internode_transport auto): " && has "^ \+32K \+2  recursive_doubling " && has "^ \+2M \+2  rabenseifner "; }
check_run "llrdma-check, 2+2 at hint 64K: hierarchical plan, slices and inter-node step" check_plan
launch -np 5 --mca coll_llrdma_node_split 2,2,1 --mca coll_llrdma_size_hint 16K "$CHECK"
check_plan() { has "plan for 5 ranks on 3 nodes (2+2+1), MPI_DOUBLE, coll hint 16K:" &&
  has "^ \+64M \+1  ring \+[0-9]\+ \+2  large"; }
check_run "llrdma-check, 2+2+1: one slice, ring across 3 nodes" check_plan

# Where hierarchical is not the way: one rank per node, and no arenas.
launch -np 3 "${V[@]}" --mca coll_llrdma_node_split 1 "$T"
check_pass "1+1+1: suite" t_allreduce 3
check_run "1+1+1: flat (one rank per node)" has "MPI_COMM_WORLD: 3 ranks on 3 node(s), .*: flat (one rank per node"
launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 --mca coll_llrdma_shm 0 "$T"
check_pass "2+2 without arenas: suite" t_allreduce 4
check_run "2+2 without arenas: flat above a flat module" \
  has "MPI_COMM_WORLD: 4 ranks on 2 node(s), .*: flat (several ranks per node but no arena"

# coll/han enabled below coll/llrdma: on one host it steps aside itself (no
# remote peers), so coll/tuned is below and coll/llrdma, without arenas,
# stays flat; llrdma-check says the same.  (Stepping aside for a real han
# below needs several hosts: the mode table is unit-tested.)
H=(--mca coll_han_priority 35 --mca coll_llrdma_shm 0 --mca coll_llrdma_node_split 2)
launch -np 4 "${V[@]}" "${H[@]}" "$TRING"
check_pass "han enabled, no arenas: PASS" t_ring 4
check_run "han enabled on one host: not below, coll/llrdma flat" \
  has "MPI_COMM_WORLD: 4 ranks on 2 node(s), .*: flat (several ranks per node but no arena, and the module below is flat too)"
launch -np 4 "${H[@]}" "$CHECK"
check_run "llrdma-check agrees" has "^  flat: several ranks per node but no arena, and the module below is flat too"

# A node arena that cannot be set up on one node: no arenas anywhere, the
# communicator runs flat, said by the rank that failed.
launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 -x LLRDMA_TEST_SHM_FAIL=2:3 "$T"
check_pass "2+2, node 1's arena fails to map: suite" t_allreduce 4
check_run "2+2, node 1's arena fails: said, then flat" has "no shared-memory arena on MPI_COMM_WORLD"

# Bad knob values stop MPI_Init naming the knob and the value.
launch -np 5 --mca coll_llrdma_node_split 3,1 "$T"
bad_cover() { [ $rc -ne 0 ] && [ $rc -ne 124 ] && has "coll_llrdma_node_split = '3,1'" &&
  has "cover 4 ranks, the job has 5" && lacks "t_allreduce rank [0-9]*: PASS"; }
check "node_split 3,1 on 5 ranks: MPI_Init fails naming it (exit $rc)" bad_cover
launch -np 2 --mca coll_llrdma_node_split 2,x "$T"
bad_text() { [ $rc -ne 0 ] && [ $rc -ne 124 ] && has "coll_llrdma_node_split = '2,x'" &&
  lacks "t_allreduce rank [0-9]*: PASS"; }
check "node_split '2,x': MPI_Init fails naming it (exit $rc)" bad_text
finish

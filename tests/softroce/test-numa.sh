#!/usr/bin/env bash
# coll/llrdma's arena pages are first-touched by the ranks that use them
# (docs/allreduce.md, "NUMA placement"), checked in a guest with two NUMA
# nodes (contrib/softroce-vm --numa 2, by hand; in the tier's one-node guest
# it skips).
# 4 ranks, two bound to each node (--map-by numa --bind-to numa), two
# verified Allreduces of 8 MB; at coll_llrdma_verbose 10 every rank reports
# the node it runs on and where the whole pages of its own arena ranges are
# (move_pages(2)).  Pass: every rank's pages all on its own node.  The
# threshold is all, not "nearly all": only whole pages of the rank's own
# ranges are counted, each reserved by that rank while bound to its node, and
# a node of the guest has >1 GB free for an arena of a few MB, so the kernel
# has no reason to fall back to the other node.  Negative controls, same
# run otherwise: LLRDMA_TEST_SHM_RANK0_TOUCHES=1 (rank 0 first-touches the
# whole arena, as before the fix) and `numactl --membind=0` on every rank:
# the check must flag the ranks on node 1.  Skips on a machine with one node
# unless LLRDMA_EXPECT_NUMA=2 (then a missing node is a failure).
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_allreduce"
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -lt 2 ]; then
  if [ "${LLRDMA_EXPECT_NUMA:-1}" -ge 2 ]; then
    not_ok "the machine has ${LLRDMA_EXPECT_NUMA} NUMA nodes (found $nodes)"
  else
    skip "arena pages on each rank's own NUMA node" "$nodes NUMA node(s); boot with softroce-vm --numa 2"
  fi
  finish; exit
fi
for d in /sys/devices/system/node/node[0-9]*; do
  echo "# ${d##*/}: cpus $(cat "$d/cpulist"), $(grep -o 'MemTotal:.*' "$d/meminfo" | tr -s ' ')"
done
command -v numactl >/dev/null && numactl -H | sed 's/^/# numactl -H: /'

A=(-np 4 --map-by numa --bind-to numa:overload-allowed --report-bindings
   --mca btl self,vader --mca mpi_yield_when_idle 1 --mca coll_llrdma_verbose 10)
COUNT=1048576   # doubles: 8 MB, many rounds through every rank's slots

# The per-rank report lines of the last run: "R NODE PAGES LOCAL REMOTE UNKNOWN".
reports() {
  sed -n 's/.*MPI_COMM_WORLD: rank \([0-9]*\) runs on NUMA node \([0-9-]*\) (cpu [0-9-]*); its arena slots: \([0-9]*\) pages, \([0-9]*\) on node [0-9-]*, \([0-9]*\) on other nodes (most on node [0-9-]*), \([0-9]*\) not resident.*/\1 \2 \3 \4 \5 \6/p' <<<"$out" | sort -n -u
}
show() { grep "runs on NUMA node\|bound to" <<<"$out" | sed 's/^/#   /'; }
# Every rank 0..3 reported, two on each of nodes 0 and 1, each with pages.
four_ranks() {
  [ "$(reports | awk '{print $1}' | xargs)" = "0 1 2 3" ] &&
    [ "$(reports | awk '$3 > 0 {print $2}' | sort | uniq -c | awk '{print $2 ":" $1}' | xargs)" = "0:2 1:2" ]
}
# The verdict: every rank's pages all on its own node (threshold: all).
all_local() { four_ranks && [ -z "$(reports | awk '$4 != $3')" ]; }
# The negative controls: the two ranks on node 1 have (nearly) none local.
node1_flagged() {
  four_ranks && ! all_local &&
    [ "$(reports | awk '$2 == 1 && $4 * 10 < $3 {n++} END {print n + 0}')" = 2 ]
}

launch "${A[@]}" "$T" --fault 0 $COUNT
show
check_pass "4 ranks, 2 per NUMA node: two 8 MB Allreduces right" t_allreduce 4
check_run "the shared-memory arena was used" has "shared-memory arena of [0-9]* bytes"
check_run "every rank's arena pages are on its own NUMA node (all of them)" all_local

launch "${A[@]}" -x LLRDMA_TEST_SHM_RANK0_TOUCHES=1 "$T" --fault 0 $COUNT
show
check_pass "negative control, rank 0 touches the whole arena: Allreduces right" t_allreduce 4
check_run "negative control, rank 0 touches the whole arena: node 1's ranks flagged" node1_flagged

if command -v numactl >/dev/null; then
  launch "${A[@]}" numactl --membind=0 "$T" --fault 0 $COUNT
  show
  check_pass "negative control, numactl --membind=0: Allreduces right" t_allreduce 4
  check_run "negative control, numactl --membind=0: node 1's ranks flagged" node1_flagged
else
  skip "negative control, numactl --membind=0" "no numactl (softroce-vm --numa installs it)"
fi
finish

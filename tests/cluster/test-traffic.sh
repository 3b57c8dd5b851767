#!/usr/bin/env bash
# Mixed traffic across two nodes x 2 ranks (vader inside a node, btl/llrdma
# across): random peers and sizes, all-to-all (posted and unexpected), and the
# incast of the flow-control issue (3 senders, 2 of them on the other node,
# flood rank 0 while it computes).  Every byte is verified by its receiver.
. "$(dirname "$0")/env.sh"
launch -np 4 "${C[@]}" --mca btl_llrdma_size_hint 8K --mca btl_llrdma_verbose 20 \
  "$T" random 300 21 70000
check_pass "hint 8K: 4x300 random messages (0..70000 B, random peers) verified" t_llrdma 4
check_run "random: btl/llrdma connections on both nodes" across node0 node1

launch -np 4 "${C[@]}" --mca btl_llrdma_size_hint 64K "$TFLOW" alltoall 3 8 1 8193 65537
check_pass "hint 64K: MPI_Alltoall and hand-written all-to-alls, 1 B..64 KB" t_flow 4

err="$LLRDMA_TEST_HOME/incast.err"
rc=0
out=$(mpi -np 4 --map-by node "${C[@]}" --mca btl_llrdma_size_hint 8K "$BENCH" incast \
  --messages 100 --size 8 --busy-ms 1000 --iters 1 --timeout 200 --json 2> "$err") || rc=$?
grep -v '^#' "$err" | tail -n 15 | sed 's/^/# /'
grep '^{"size":' <<<"$out" | sed 's/^/# /'
check "incast, hint 8K: 3 x 100 x 8 B into rank 0, every byte verified (exit $rc)" \
  bash -c '[ $1 -eq 0 ] && grep -q "\"verified\":true}" <<<"$0"' "$out" $rc
check "incast: rank 1 (node1) -> rank 0 over btl/llrdma" \
  grep -q '^# transport rank1 -> rank0: pml=ob1 btl eager=llrdma' "$err"
finish

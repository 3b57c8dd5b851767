#!/usr/bin/env bash
# A node loses power in the middle of a job's Allreduce loop (softroce-vm cuts
# node1's QEMU on request): the job must end by itself, nonzero, with an error
# that names node1, well within the test's limit; nothing hangs.
. "$(dirname "$0")/env.sh"
log="$LLRDMA_TEST_HOME/kill.out"
t0=$SECONDS
mpi -np 4 --map-by node "${C[@]}" --mca btl_llrdma_size_hint 8K \
  "$top_builddir/tests/mpi/t_allreduce" --forever > "$log" 2>&1 &
job=$!
for _ in $(seq 600); do
  [ "$(grep -c 't_allreduce rank [0-9]*: running' "$log")" -ge 4 ] && break
  kill -0 $job 2>/dev/null || break
  sleep 0.5
done
check "all 4 ranks in the Allreduce loop ($((SECONDS - t0)) s)" \
  test "$(grep -c 't_allreduce rank [0-9]*: running' "$log")" -eq 4
sleep 2
touch "$SOFTROCE_VM_CLUSTER_DIR/kill-node1"   # the harness cuts node1's power
t1=$SECONDS
rc=0
wait $job || rc=$?
secs=$((SECONDS - t1))
out=$(cat "$log")
grep -v '^ *$' "$log" | tail -n 12 | sed 's/^/# /'
check "the job ended by itself after node1 died (exit $rc, $secs s)" \
  test $rc -ne 0 -a $rc -ne 124 -a $rc -ne 137
check "within 120 s of node1's death ($secs s)" test $secs -le 120
# ORTE: "Remote daemon: [[J,0],1] on node node1" under "lost communication".
named() { grep -A4 -iE 'lost communication|error|fail|died' <<<"$out" | grep -q 'node1'; }
check "the error names node1" named
check "the harness reported the kill" test -e "$SOFTROCE_VM_CLUSTER_DIR/killed-node1"
finish

#!/usr/bin/env bash
# Who may connect (issue 27): while a 2-rank job exchanges verified messages
# over btl/llrdma, a process outside the job (tests/softroce/t_foreign) asks
# rank 0's listener for a connection the way llrdma does, without the
# listener's secret and then with a wrong one.  Both must be rejected (the
# client sees REJECTED), the rank must say so once and count both at
# finalize, and the job's own traffic must go on and end verified.
# Soft-RoCE VM only.
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_llrdma"
F="$top_builddir/tests/softroce/t_foreign"
log="$LLRDMA_TEST_HOME/foreign.out"
stopfile="$LLRDMA_TEST_HOME/stop"
B=(--oversubscribe --mca pml ob1 --mca btl self,llrdma --bind-to none
   --mca mpi_yield_when_idle 1 --mca btl_llrdma_size_hint 8K --mca btl_llrdma_verbose 10)

"$MPIRUN" "${B[@]}" -np 2 "$T" until "$stopfile" >"$log" 2>&1 &
job=$!
started=0
for _ in $(seq 240); do
  [ "$(grep -c 'running (rank' "$log")" -eq 2 ] && { started=1; break; }
  kill -0 $job 2>/dev/null || break
  sleep 0.5
done
check "t_llrdma until FILE runs on both ranks" test $started -eq 1
# Rank 0's listener: "[host:pid] btl:llrdma: rxe0:1 listens on IP:PORT" of
# the process that printed "running (rank 0, pid P)".
pid0=$(sed -n 's/.*t_llrdma: running (rank 0, pid \([0-9]*\)).*/\1/p' "$log" | head -1)
addr=$(sed -n "s/^\[[^:]*:0*${pid0}\] btl:llrdma: .* listens on \([0-9.]*\):\([0-9]*\)$/\1 \2/p" "$log" | head -1)
check "rank 0 (pid ${pid0:-?}) said where it listens (${addr:-nothing})" test -n "$addr"
# shellcheck disable=SC2086  # addr is "IP PORT"
for mode in none wrong; do
  capture timeout 90 "$F" $addr $mode
  check "a foreign request with $mode secret is rejected (exit $rc)" test $rc -eq 0
  check "  t_foreign saw REJECTED" has "t_foreign: rejected ($mode secret)"
done
touch "$stopfile"
rc=0
for _ in $(seq 240); do kill -0 $job 2>/dev/null || break; sleep 0.5; done
if kill -0 $job 2>/dev/null; then kill -9 $(pgrep -P $job) $job 2>/dev/null; rc=124; fi
wait $job 2>/dev/null || rc=$?
# shellcheck disable=SC2034  # read by has and count (tests/mpi/env.sh)
out=$(cat "$log")
grep -E "outside this job|verified rounds|PASS|FAIL" "$log" | sed 's/^/# /'
check "the job ends cleanly (exit $rc)" test $rc -eq 0
check "both ranks' traffic verified to the end" count "t_llrdma rank [01]: PASS until" 2
check "rank 0 said it once, naming the missing secret" \
  count "btl:llrdma: .* rejected a connection request from outside this job (without this listener's secret)" 1
check "rank 0 counted both at finalize" has "btl:llrdma: .* rejected 2 connection request(s) from outside this job"
finish

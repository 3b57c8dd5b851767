#!/usr/bin/env bash
# Killing one rank mid-run ends the job with an error, never a hang
# (btl/llrdma carries all traffic).  Soft-RoCE VM only.
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_llrdma"
log="$LLRDMA_TEST_HOME/kill.out"

for n in 2 4; do
  t0=$SECONDS
  "$MPIRUN" --oversubscribe -np $n --mca pml ob1 --mca btl self,llrdma --bind-to none \
    --mca mpi_yield_when_idle 1 --mca btl_llrdma_size_hint 8K "$T" forever >"$log" 2>&1 &
  job=$!
  for _ in $(seq 120); do
    [ "$(grep -c 'running (rank' "$log")" -eq $n ] && break
    sleep 0.5
  done
  sleep 1
  # The ranks are mpirun's children on a single node.
  victim=$(pgrep -P $job | tail -n 1)
  kill -9 "$victim"
  # The job must end on its own well within a minute.
  for _ in $(seq 60); do kill -0 $job 2>/dev/null || break; sleep 1; done
  if kill -0 $job 2>/dev/null; then
    hung=1; kill -9 $(pgrep -P $job) $job
  else
    hung=0
  fi
  rc=0; wait $job || rc=$?
  grep -v '^ *$' "$log" | tail -n 6 | sed 's/^/# /'
  check "$n ranks: job ended by itself after a rank was killed ($((SECONDS - t0)) s)" test $hung -eq 0
  check "$n ranks: with an error status ($rc) and a message" \
    bash -c "[ $rc -ne 0 ] && grep -q 'exited on signal 9\|llrdma: transport error' '$log'"
done
finish

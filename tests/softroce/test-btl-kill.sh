#!/usr/bin/env bash
# A rank killed mid-run (btl/llrdma carries all traffic).  Soft-RoCE VM only.
#  1. Launched as usual (t_llrdma forever), the job ends on its own with an
#     error status, never a hang.  mpirun cleans up after the killed rank,
#     usually before any surviving rank's BTL has noticed, so this part proves
#     no BTL behaviour.
#  2. With mpirun told to leave the survivors running (--enable-recovery) and
#     the killed rank's partner still sending to it (t_llrdma stream), the
#     partner's btl/llrdma itself must report the lost peer: the "transport
#     error" help text (common/help-mpi-llrdma.txt) with "btl/llrdma: ... with
#     peer rank V (...)".  A send into the dead connection fails or its
#     reconnection gives up after btl_llrdma_connect_timeout (10 s here).
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_llrdma"
log="$LLRDMA_TEST_HOME/kill.out"
B=(--oversubscribe --mca pml ob1 --mca btl self,llrdma --bind-to none
   --mca mpi_yield_when_idle 1 --mca btl_llrdma_size_hint 8K)
WAIT=${LLRDMA_KILL_WAIT:-60} # seconds for the job to end / the report to come

# start N MODE [MPIRUN-OPTIONS...]: t_llrdma MODE on N ranks in the background
# ($job: mpirun's PID); fails unless every rank said it runs within 60 s.
start() {
  local n=$1 mode=$2; shift 2
  "$MPIRUN" "${B[@]}" -np "$n" "$@" "$T" "$mode" >"$log" 2>&1 &
  job=$!
  for _ in $(seq 120); do
    [ "$(grep -c 'running (rank' "$log")" -eq "$n" ] && return 0
    kill -0 $job 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
# kill_rank V: SIGKILL rank V, found by the PID it printed, which must be one
# of mpirun's children (the ranks of a single-node job).
kill_rank() {
  local pid
  pid=$(sed -n "s/.*t_llrdma: running (rank $1, pid \([0-9]*\)).*/\1/p" "$log" | head -1)
  [ -n "$pid" ] && pgrep -P $job | grep -qx "$pid" && kill -9 "$pid"
}
# stop: end what is left of the job; $rc gets mpirun's exit status.
stop() {
  kill -9 $(pgrep -P $job) $job 2>/dev/null
  rc=0; wait $job 2>/dev/null || rc=$?
}
show_log() { grep -v '^ *$' "$log" | tail -n "${1:-8}" | sed 's/^/#   /'; }

for n in 2 4; do
  v=$((n - 1)) # odd: in stream mode a receiver, its partner v - 1 the sender
  # ---- 1. as launched normally: the job ends by itself, with an error.
  t0=$SECONDS
  if ! start $n forever; then
    not_ok "$n ranks: t_llrdma forever did not start on every rank"; show_log 20; stop; continue
  fi
  sleep 1
  check "$n ranks: rank $v killed" kill_rank $v
  for _ in $(seq "$WAIT"); do kill -0 $job 2>/dev/null || break; sleep 1; done
  hung=0; kill -0 $job 2>/dev/null && hung=1
  stop
  show_log 6
  check "$n ranks: job ended by itself after rank $v was killed ($((SECONDS - t0)) s)" \
    test $hung -eq 0
  check "$n ranks: with an error status (exit $rc)" test $hung -eq 0 -a $rc -ne 0
  # coll/llrdma's arena can notice first (mpirun's own report then may be lost:
  # "Data unpack had inadequate space" in show_help, seen 2026-12-04).
  check "$n ranks: the killed rank is named (by mpirun, a survivor's btl/llrdma or coll/llrdma)" \
    grep -q "exited on signal 9\|btl/llrdma: .*with peer rank $v (\|coll:llrdma: .*: rank $v is gone" "$log"

  # ---- 2. survivors left running: rank v-1's btl/llrdma must report peer rank v.
  t0=$SECONDS
  if ! start $n stream --enable-recovery --mca btl_llrdma_connect_timeout 10; then
    not_ok "$n ranks, --enable-recovery: t_llrdma stream did not start on every rank"
    show_log 20; stop; continue
  fi
  sleep 1
  if ! kill_rank $v; then
    not_ok "$n ranks, --enable-recovery: could not kill rank $v"; show_log 20; stop; continue
  fi
  reported=0
  for _ in $(seq $((2 * WAIT))); do
    if grep -q "btl/llrdma: .*with peer rank $v (" "$log"; then reported=1; break; fi
    sleep 0.5
  done
  sleep 1 # let the rest of the report through
  left=$(pgrep -P $job | xargs)
  stop
  grep -m 3 "btl/llrdma: " "$log" | sed 's/^/# /'
  if [ $reported -eq 1 ]; then
    ok "$n ranks: a surviving rank's btl/llrdma reported peer rank $v ($((SECONDS - t0)) s)"
  else
    not_ok "$n ranks: no surviving rank's btl/llrdma reported peer rank $v within $WAIT s" \
      "(no 'btl/llrdma: ... with peer rank $v (' line; ranks still running: ${left:-none})"
    show_log 20
  fi
done
finish

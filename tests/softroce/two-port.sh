#!/usr/bin/env bash
# Runs in a guest booted with `contrib/softroce-vm --ports 2` (tier.sh): two
# Soft-RoCE devices, rxe0 (dummy0, 192.0.2.1/24) and rxe1 (dummy1,
# 10.77.1.1/24), so every process opens two btl/llrdma modules and ob1
# stripes over both.
#
# - 4 threads per rank, verified ping-pong (t_threads), progress thread on,
#   hints 0 and 16K: each device's own packet counters (the kernel's, not
#   llrdma's) grow by traffic on both;
# - the same job with rxe1's netdev taken down mid-run: the job ends with a
#   message saying port rxe1:1 went down, well before the completion
#   watchdog (60 s) would have said anything, and does not hang.
. ./tests/mpi/env.sh
T="$top_builddir/tests/softroce/t_threads"
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1
   --mca btl_llrdma_progress_thread 1)

pkts() { # DEVICE: packets it sent and received, as the kernel counts them
  local d=/sys/class/infiniband/$1/ports/1/hw_counters
  echo $(( $(cat "$d/sent_pkts") + $(cat "$d/rcvd_pkts") ))
}

for dev in rxe0 rxe1; do
  out=$(ibv_devinfo -d $dev 2>&1) rc=$?
  check_run "$dev is an active verbs port" has PORT_ACTIVE
done

for hint in 0 16384; do
  a0=$(pkts rxe0) a1=$(pkts rxe1)
  launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint $hint --mca btl_llrdma_verbose 50 \
    "$T" pingpong 20 1 8 4096 16384 16385 70000 1048577
  check_pass "hint $hint: 4 threads x verified ping-pong over two ports" t_threads 2
  both() { has "reachable at rxe0" && has "reachable at rxe1"; }
  check_run "hint $hint: each rank reaches its peer on both devices (verbose 50)" both
  d0=$(( $(pkts rxe0) - a0 )) d1=$(( $(pkts rxe1) - a1 ))
  echo "# hint $hint: rxe0 $d0 packets, rxe1 $d1 packets"
  out="$d0 $d1" rc=0
  traffic() { [ "$d0" -ge 1000 ] && [ "$d1" -ge 1000 ]; }
  check_run "hint $hint: both devices carried the job (>= 1000 packets each, kernel counters)" traffic
done

# rxe1 goes down while 2 ranks ping-pong over both ports.
log=$(mktemp)
t0=$SECONDS
timeout -k 5 240 "$MPIRUN" --oversubscribe -np 2 "${B[@]}" --mca btl_llrdma_size_hint 8K \
  "$T" pingpong 100000 8 4096 70000 > "$log" 2>&1 &
job=$!
for _ in $(seq 600); do # the job is under way: both devices move packets
  [ "$(pkts rxe1)" -gt "$((a1 + d1 + 2000))" ] && break
  sleep 0.1
done
down=$SECONDS
ip link set dummy1 down
rc=0
wait $job || rc=$?
took=$((SECONDS - down))
ip link set dummy1 up
# shellcheck disable=SC2034 # read by check_run's has
out=$(cat "$log")
rm -f "$log"
echo "# rxe1 down after $((down - t0)) s; the job ended $took s later with exit $rc"
# A job that ends in error is the expected outcome here (check_run wants exit
# 0 of the run it judges: the job's own status is judged by `ended`).
job_rc=$rc rc=0
ended() { [ "$job_rc" -ne 0 ] && [ "$job_rc" -ne 124 ] && [ "$job_rc" -ne 137 ] && [ "$took" -lt 45 ]; }
check_run "rxe1 down mid-run: the job ends (exit $job_rc) $took s after, no hang" ended
# rxe fails the work on the port at once ("local QP operation error"), often
# before its PORT_ERR event is read: either way the report names the port.
check_run "rxe1 down mid-run: the message says port rxe1:1 went down" has "port rxe1:1 went down"
finish

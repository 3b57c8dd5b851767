#!/usr/bin/env bash
# coll/llrdma when one rank fails and the others do not: a failure on one rank
# only (an allocation, a GPU copy before the arena, a stream sync inside it,
# a libllrdma_cuda.so that will not load) ends that call with an error on
# every rank instead of leaving the others waiting, and the next call works on
# a fresh arena; a rank killed during an arena Allreduce is named by the
# survivors within seconds; a communicator whose ranks disagree on the plan
# hands its Allreduce to the module below once, as does one made with info
# llrdma_allreduce=false.  Every rank judges its own
# results (env.sh: check_pass).
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_allreduce"
TG="$top_builddir/tests/fakegpu/t_allreduce_fakegpu"
FAKE="$top_builddir/tests/fakegpu/.libs/libfakegpu.so"
V=(--mca coll_llrdma_verbose 1)
export LLRDMA_TEST_TIMEOUT=${LLRDMA_TEST_TIMEOUT:-90}

# Host buffers: rank 1's scratch allocation fails in its third arena call.
for alg in shm_direct shm_split; do
  for n in 2 3; do
    launch -np $n "${V[@]}" --mca coll_llrdma_allreduce_algorithm $alg \
      -x LLRDMA_TEST_ALLOC_FAIL=1:3 "$T" --fault 3
    check_pass "$n ranks, $alg: one rank's allocation fails: that call fails everywhere, the next works" \
      t_allreduce $n
    check_run "$n ranks, $alg: the arena was rebuilt" has "every rank sets up a fresh one"
  done
done
# Without the arena (message algorithms over the PML) and across (test-only)
# nodes: the rank without scratch still runs the call's schedule, every
# receive into its own vector, every send empty, so the others fail that call
# too instead of waiting for its messages (before: they waited for good);
# over the PML alone the next calls work, across nodes they fail too (the
# node arena is not rebuilt).  1M doubles: rendezvous messages.
for alg in recursive_doubling ring rabenseifner; do
  for cnt in 1000 1048576; do
    launch -np 4 "${V[@]}" --mca coll_llrdma_shm 0 --mca coll_llrdma_allreduce_algorithm $alg \
      -x LLRDMA_TEST_ALLOC_FAIL=2:3 "$T" --fault 3 "$cnt"
    check_pass "4 ranks, $alg over the PML, $cnt doubles, rank 2 has no scratch in call 3: every rank fails it, the next work" \
      t_allreduce 4
    check_run "4 ranks, $alg, $cnt doubles: it ran its schedule empty" \
      has "no memory for its scratch; the call ran its schedule empty"
  done
done
launch -np 4 "${V[@]}" --mca coll_llrdma_node_split 2 -x LLRDMA_TEST_ALLOC_FAIL=1:3 "$T" \
  --fault-stays 3 1048576
check_pass "2+2 nodes, rank 1 has no scratch in call 3: every rank fails it and the later ones" \
  t_allreduce 4
check_run "2+2 nodes: node 1 learned it from the inter-node step's messages" \
  has "another rank failed in this call (its messages said so)"
# Many rounds per call (64-byte chunks): the failure hits mid-stream.
launch -np 3 "${V[@]}" --mca coll_llrdma_shm_chunk_size 64 -x LLRDMA_TEST_ALLOC_FAIL=2:2 \
  "$T" --fault 2 5000
check_pass "3 ranks, 64-byte chunks, rank 2 fails: no hang, recovered" t_allreduce 3

# After a --die 1 run of N ranks: every rank but 1 says PASS (its calls
# after the death failed within 10 s) and names rank 1 gone "while ... waited
# for WHAT".  check_killed N LABEL WHAT
check_killed() {
  local n=$1 label=$2 what=$3 got want
  got=$(grep -o "t_allreduce rank [0-9]*: PASS" <<<"$out" | awk '{ print $3 + 0 }' | sort -n | xargs)
  want=$(seq -s ' ' 0 $((n - 1)) | sed 's/\b1\b *//; s/ *$//')
  check "$n ranks, $label, rank 1 killed: the others PASS (error within 10 s) [$got]" \
    test "$got" = "$want"
  check "$n ranks, $label, rank 1 killed: named by the survivors" \
    has "rank 1 is gone (its process exited) while rank [0-9]* waited for $what"
  grep -w FAIL <<<"$out" | head -5 | sed 's/^/#   /'
}
# A rank killed while the others wait in the arena: they end with an error
# naming it (mpirun keeps them running with --enable-recovery).  1000
# doubles go through the slots; 8 (64 bytes) through the lines, calls 2 and
# 3 by the glue's prepared call (lines_call).
for n in 2 4; do
  for cnt in 1000 8; do
    launch --enable-recovery -np $n "$T" --die 1 3 $cnt
    check_killed $n "$cnt doubles" it
  done
done
# The shared fold (tiles of any slice may be with any rank): 4 ranks, rounds
# of 128K doubles shared, rank 1 killed in its third call.
launch --enable-recovery -np 4 --mca coll_llrdma_verbose 5 --mca coll_llrdma_shm_share_ranks 2 \
  --mca coll_llrdma_shm_share_min 64K "$T" --die 1 3 131072
check_killed 4 "shared fold" it
check "4 ranks, shared fold: the arena shared its folds" \
  has "folds shared from 65536 bytes per round"
# Without the arena (the message algorithms over the PML): a rank killed
# while the others wait for its messages, 1M doubles (rendezvous sends to it
# that ob1 cannot cancel).  Before the message waits checked liveness, the
# survivors waited until the launcher's timeout.
for n in 2 4; do
  for alg in recursive_doubling ring; do
    launch --enable-recovery -np $n --mca coll_llrdma_shm 0 \
      --mca coll_llrdma_allreduce_algorithm $alg "$T" --die 1 3 1048576
    check_killed $n "$alg over the PML" "a message"
  done
done
# The survivors look for a gone rank every millisecond, so some look while
# others still run call 2 (rank 1 finished it and died at the start of call
# 3): when a survivor gave up *all* its messages, 6 of 100 such runs failed
# call 2, and a rank could return a wrong sum as success, read from a peer's
# buffer after that peer's call 2 had returned (contrib/bench/die-loop.sh).
bad=0
for _ in $(seq 1 30); do
  launch --enable-recovery -np 4 --mca coll_llrdma_shm 0 --mca coll_llrdma_shm_liveness_ms 1 \
    --mca coll_llrdma_allreduce_algorithm recursive_doubling "$T" --die 1 3 1048576
  [ "$(grep -c "t_allreduce rank [0-9]*: PASS" <<<"$out")" = 3 ] && ! grep -qw FAIL <<<"$out" ||
    { bad=$((bad + 1)); grep -w FAIL <<<"$out" | head -3 | sed 's/^/#   /'; }
done
check "4 ranks, rank 1 killed at call 3, survivors looking every 1 ms: 30 of 30 runs PASS ($bad not)" \
  test $bad -eq 0
# Rank 1 killed between its two messages of call 3 (recursive doubling, 4
# ranks: two sends a call; coll/llrdma's test hook counts them).  With 100
# doubles (eager) rank 1's first message arrives, so ranks 0 and 2 may finish
# call 3 with the right sum while rank 3 fails it; call 4 must then still
# fail on all of them, not leave ranks 0 and 2 waiting for rank 3 (which
# knows).  With 1M doubles nothing of rank 1's arrives.  Only the dead rank's
# messages are given up: a survivor's sends to live peers complete, so none
# of them is read after its call returned (docs/allreduce.md, "Failures").
for cnt in 100 1048576; do
  launch --enable-recovery -np 4 --mca coll_llrdma_shm 0 --mca coll_llrdma_shm_liveness_ms 1 \
    --mca coll_llrdma_allreduce_algorithm recursive_doubling -x LLRDMA_TEST_DIE_AT_SEND=1:6 \
    "$T" --die-mid 3 "$cnt"
  got=$(grep -o "t_allreduce rank [0-9]*: PASS" <<<"$out" | awk '{ print $3 + 0 }' | sort -n | xargs)
  check "4 ranks, rank 1 killed inside call 3 ($cnt doubles): the others PASS [$got]" \
    test "$got" = "0 2 3"
  check "4 ranks, rank 1 killed inside call 3 ($cnt doubles): named" \
    has "rank 1 is gone (its process exited) while rank [0-9]* waited for a message"
  grep -w FAIL <<<"$out" | head -5 | sed 's/^/#   /'
done
LLRDMA_TEST_TIMEOUT=15 launch --enable-recovery -np 2 --mca coll_llrdma_shm_liveness_ms 0 \
  "$T" --die 1 3
# Without the check the survivor keeps waiting (the launcher's timeout ends it).
check "liveness check off: the survivor is not told (the check is what ends the wait)" \
  lacks "is gone (its process exited)"
LLRDMA_TEST_TIMEOUT=15 launch --enable-recovery -np 2 --mca coll_llrdma_shm_liveness_ms 0 \
  --mca coll_llrdma_shm 0 "$T" --die 1 3 1048576
check "liveness check off, over the PML: the survivor waits until the launcher's timeout (exit $rc)" \
  test "$rc" -eq 124 -o "$rc" -eq 137

# GPU buffers through the fake GPU: the failure on one rank only.
if [ -f "$FAKE" ]; then
  mkdir -p "$LLRDMA_TEST_HOME/lib"
  ln -sf "$FAKE" "$LLRDMA_TEST_HOME/lib/libcuda.so.1"
  export LD_LIBRARY_PATH="$LLRDMA_TEST_HOME/lib:$LD_LIBRARY_PATH"
  export LLRDMA_CUDA_LIB="$FAKE"
  P=t_allreduce_fakegpu
  # Whole-vector copy to the host (before the arena) fails on rank 1 at call 3.
  launch -np 1 "${V[@]}" "$TG" --fault 3 : -np 1 -x FAKEGPU_FAIL_COPY_AT=5 "$TG" --fault 3
  check_pass "GPU copy before the arena fails on one rank: no hang, recovered" $P 2
  # Stream sync inside the arena fails on rank 1 at call 3: through the slots
  # (one sync per call), and through the lines (800-byte vectors, lines up
  # to 1K: two per call, the fifth is call 3's first).
  L0=(--mca coll_llrdma_shm_lines_max 0)
  launch -np 1 "${V[@]}" "${L0[@]}" --mca coll_llrdma_gpu_stage_max 0 "$TG" --fault 3 \
    : -np 1 "${L0[@]}" -x FAKEGPU_FAIL_SYNC_AT=3 "$TG" --fault 3
  check_pass "GPU sync in the arena fails on one rank: no hang, recovered" $P 2
  L1=(--mca coll_llrdma_shm_lines_max 1K)
  launch -np 1 "${V[@]}" "${L1[@]}" --mca coll_llrdma_gpu_stage_max 0 "$TG" --fault 3 \
    : -np 1 "${L1[@]}" -x FAKEGPU_FAIL_SYNC_AT=5 "$TG" --fault 3
  check_pass "GPU sync in the arena's lines fails on one rank: no hang, recovered" $P 2
  # Without the arena (GPU staging over the PML): rank F's staging copy
  # fails in call 3.  The failure travels in the schedule's own messages (an
  # empty one): the other rank's call 3 fails too, nothing of call 3 is left
  # for call 4 (before, the other rank's call 3 took call 4's message: a
  # wrong result, then a hang).
  for f in 0 1; do
    args=(--mca coll_llrdma_verbose 1 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_shm 0)
    if [ $f = 0 ]; then
      launch -np 1 "${args[@]}" -x FAKEGPU_FAIL_AT=3 "$TG" --fault 3 : -np 1 "${args[@]}" "$TG" --fault 3
    else
      launch -np 1 "${args[@]}" "$TG" --fault 3 : -np 1 "${args[@]}" -x FAKEGPU_FAIL_AT=3 "$TG" --fault 3
    fi
    check_pass "over the PML, rank $f's GPU staging fails: both ranks' call fails, no hang, the next works" $P 2
    check_run "over the PML, rank $f fails: the other rank learns it from the messages" \
      has "another rank failed in this call (its messages said so)"
  done
  # Over the PML too: the whole-vector copy to the host fails on rank 1 at
  # call 3 (before the host pass): the pass still runs, carrying the failure.
  launch -np 1 "${V[@]}" --mca coll_llrdma_shm 0 "$TG" --fault 3 \
    : -np 1 --mca coll_llrdma_shm 0 -x FAKEGPU_FAIL_COPY_AT=5 "$TG" --fault 3
  check_pass "over the PML, GPU copy before the host pass fails on one rank: no hang, recovered" $P 2
  check_run "over the PML, copy before the host pass fails: the other rank learns it" \
    has "another rank failed in this call (its messages said so)"
  # One rank cannot load libllrdma_cuda.so: every call fails on every rank.
  launch -np 1 "$TG" --fault-sticky 1 : -np 1 -x LLRDMA_CUDA_LIB=/nonexistent/libllrdma_cuda.so \
    -x FAKEGPU_LIB="$FAKE" "$TG" --fault-sticky 1
  check_pass "one rank cannot load the GPU library: every call fails everywhere, none hangs" $P 2
else
  not_ok "libfakegpu.so not built"
fi

# Ranks that disagree on the plan: the first call says so, later calls skip
# coll/llrdma (the one-per-rank "disagree" line is the first call's).
launch --mca op ^avx --mca coll_llrdma_verbose 10 --mca coll_llrdma_mismatch_action warn \
  -np 1 -x OMPI_MCA_btl_llrdma_size_hint=4K "$T" : -np 1 -x OMPI_MCA_btl_llrdma_size_hint=1M "$T"
check_pass "plan mismatch: results correct" t_allreduce 2
check_run "plan mismatch: handed to the previous module once per rank" \
  count "MPI_COMM_WORLD: Allreduce handed to the previous module (.*) for good" 2
check_run "plan mismatch on MPI_COMM_WORLD: only its first call passed through coll/llrdma" \
  count "on MPI_COMM_WORLD: ranks disagree on the plan inputs" 2
# A communicator made with info llrdma_allreduce=false is handed to the module
# below at its first call, on every rank even if only one rank's info says so;
# a value that is not a boolean is named and ignored.  (op ^avx: Open MPI's
# own Allreduce then sums unsigned chars, which op/avx 4.1.4 saturates.)
D="t_allreduce info dup: Allreduce handed to the previous module (.*) for good"
launch --mca op ^avx -np 2 --mca coll_llrdma_verbose 10 "$T" --info false
check_pass "info llrdma_allreduce=false: results correct" t_allreduce 2
check_run "info false: handed to the previous module once per rank" count "$D" 2
check_run "info false: the reason is the info key" \
  has "on t_allreduce info dup: the communicator's info sets llrdma_allreduce=false"
# Level 5 says the hand-over once and nothing per call (level 10's per-call
# lines cost milliseconds across nodes, so benchmarks use 5).
launch --mca op ^avx -np 2 --mca coll_llrdma_verbose 5 "$T" --info false
check_run "verbose 5: the hand-over once per rank, no per-call line" \
  eval 'count "$D" 2 && lacks "coll:llrdma: allreduce .* bytes" && lacks "using the previous module"'
launch --mca op ^avx -np 2 --mca coll_llrdma_verbose 10 "$T" --info OFF 0
check_pass "info off on rank 0 only: results correct" t_allreduce 2
check_run "info on one rank: both ranks hand it down" count "$D" 2
check_run "info on one rank: the other rank says so" \
  count "rank 1 of t_allreduce info dup: its info does not set llrdma_allreduce=false" 1
launch --mca op ^avx -np 2 --mca coll_llrdma_verbose 10 "$T" --info maybe
check_pass "info llrdma_allreduce=maybe: results correct" t_allreduce 2
check_run "info maybe: named on every rank, ignored (coll/llrdma keeps the communicator)" \
  eval 'count "llrdma_allreduce=.maybe. is not a boolean" 2 && count "$D" 0'
launch --mca op ^avx -np 2 --mca coll_llrdma_verbose 10 "$T" --info true
check_run "info true: coll/llrdma keeps the communicator" count "$D" 0
finish

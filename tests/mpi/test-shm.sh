#!/usr/bin/env bash
# coll/llrdma's shared-memory arena through real Open MPI: both shm algorithms
# forced, many rounds (64-byte chunks), the arena switched off, every setup
# failure (open, reserve, map, on the creating rank and on another) falling
# back to point-to-point on every rank with the reason said by that rank, a
# full /dev/shm halving the chunk, and nothing left behind in /dev/shm.
# Every rank judges its own results (env.sh: check_pass).
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_allreduce"
V=(--mca coll_llrdma_verbose 10)
leftovers() { find /dev/shm -maxdepth 1 -name 'llrdma-coll-*' 2>/dev/null | wc -l; }
before=$(leftovers)

for alg in shm_direct shm_split; do
  for n in 2 3 4; do
    launch -np $n "${V[@]}" --mca coll_llrdma_allreduce_algorithm $alg "$T"
    check_pass "$n ranks, $alg forced: PASS" t_allreduce $n
    check_run "$n ranks, $alg forced: ran" has ": $alg, segment"
  done
done
launch -np 3 "${V[@]}" "$T"
check_pass "3 ranks, planner: PASS" t_allreduce 3
check_run "3 ranks, planner: shm_direct for small vectors" has ": shm_direct, segment"
check_run "3 ranks, planner: shm_split above" has ": shm_split, segment"
check_run "3 ranks: the arena was set up" has "shared-memory arena of [0-9]* bytes, chunk"
# Thousands of arena rounds per call, 4 ranks on a 2-core CI machine (they
# yield while waiting: docs/allreduce.md, "Waits"); three times the usual
# limit all the same.
LLRDMA_TEST_TIMEOUT=$((${LLRDMA_TEST_TIMEOUT:-120} * 3)) launch -np 4 "${V[@]}" \
  --mca coll_llrdma_shm_chunk_size 64 "$T"
check_pass "4 ranks, 64-byte chunks (many rounds per call)" t_allreduce 4
check_run "4 ranks, 64-byte chunks: the arena had them" has "shared-memory arena of .* chunk 64 ("
check_run "4 ranks, 64-byte chunks: the arena's algorithms ran" has ": shm_\(direct\|split\), segment"
# Vectors of at most 1 KB on host buffers go through the arena's lines (data
# and round number in one cache line); coll_llrdma_shm_lines_max 0 turns it
# off.  The count each rank says when its arena is released is the check.
launch -np 3 --mca coll_llrdma_verbose 5 "$T"
check_pass "3 ranks, small vectors in lines: PASS" t_allreduce 3
check_run "3 ranks: the arena says its line limit" has "3 ranks, vectors up to 280 bytes in lines"
check_run "3 ranks: calls ran in lines" has "released after [0-9]* rounds, [1-9][0-9]* of them in lines"
check_run "3 ranks: no fold shared by default (fewer than 8 ranks)" \
  lacks "through the slots ([1-9][0-9]* with the fold shared"
# A call like the one before (the suite repeats small calls) goes to the lines
# without re-planning; t_allreduce checked every result.
check_run "3 ranks: repeated small calls went to the lines without re-planning" \
  has "of them in lines ([1-9][0-9]* calls without re-planning)"
# Lines off, and the copies out streamed from 1 KB (unshared rounds here).
launch -np 3 --mca coll_llrdma_verbose 5 --mca coll_llrdma_shm_lines_max 0 \
  --mca coll_llrdma_shm_stream_min 1K "$T"
check_pass "3 ranks, lines off: PASS" t_allreduce 3
check_run "lines off, streamed from 1K: rounds copied out streamed" \
  has "tiles folded for other ranks, [1-9][0-9]* copied out streamed)"
check_run "lines off: none ran in lines" has "released after [1-9][0-9]* rounds, 0 of them in lines"
check_run "lines off: no call ran in lines" lacks "rounds, [1-9][0-9]* of them in lines"
check_run "lines off: repeated calls skipped the planner, through the slots" \
  has "0 of them in lines ([1-9][0-9]* calls without re-planning)"
# The shared fold (coll_llrdma_shm_share_min): rounds of at least 1 KB with
# their tiles claimed by any rank, 64-byte chunks too (many shared rounds).
# Each rank counts its shared rounds when its arena is released (t_allreduce
# also makes smaller communicators: at least one arena's line).  The small
# chunks' copies out are streamed (coll_llrdma_shm_stream_min 1K), the
# default chunk's never (0).
for chunk in 0 1K; do
  stream=0
  [ $chunk = 1K ] && stream=1K
  launch -np 3 --mca coll_llrdma_verbose 5 --mca coll_llrdma_shm_share_min 1K \
    --mca coll_llrdma_shm_share_ranks 2 --mca coll_llrdma_shm_chunk_size $chunk \
    --mca coll_llrdma_shm_stream_min $stream "$T"
  check_pass "3 ranks, shared fold (chunk $chunk): PASS" t_allreduce 3
  check_run "shared fold (chunk $chunk): the arena says its threshold" \
    has "folds shared from 1024 bytes per round"
  check_run "shared fold (chunk $chunk): rounds ran shared" \
    has "through the slots ([1-9][0-9]* with the fold shared"
  if [ $stream = 0 ]; then
    check_run "shared fold (chunk $chunk), stream_min 0: nothing copied out streamed" \
      lacks "[1-9][0-9]* copied out streamed)"
  else
    check_run "shared fold (chunk $chunk), stream_min $stream: copied out streamed" \
      has "[1-9][0-9]* copied out streamed)"
  fi
done
# Below coll_llrdma_shm_share_ranks the arena does not share (3 ranks, 4 asked).
launch -np 3 --mca coll_llrdma_verbose 5 --mca coll_llrdma_shm_share_min 1K \
  --mca coll_llrdma_shm_share_ranks 4 "$T"
check_pass "3 ranks, shared fold from 4 ranks: PASS" t_allreduce 3
check_run "shared fold from 4 ranks: none on 3" has "folds shared from 0 bytes per round"
check_run "shared fold from 4 ranks: no round shared" \
  lacks "through the slots ([1-9][0-9]* with the fold shared"
# Verbosity 10 prints each call's plan line: then every call is planned.
launch -np 3 --mca coll_llrdma_verbose 10 "$T"
check_pass "3 ranks, verbose 10: PASS" t_allreduce 3
check_run "verbose 10: no call skipped the planner" has "(0 calls without re-planning)"
check_run "verbose 10: none said otherwise" lacks "([1-9][0-9]* calls without re-planning)"
launch -np 3 "${V[@]}" --mca coll_llrdma_shm 0 "$T"
check_pass "arena off: PASS" t_allreduce 3
check_run "arena off: coll/llrdma ran" has "coll:llrdma: allreduce .* bytes"
check_run "arena off: no shm algorithm" lacks ": shm_\(direct\|split\), segment"

for rank in 0 1; do
  for step in 1 2 3; do
    launch -np 3 "${V[@]}" -x LLRDMA_TEST_SHM_FAIL=$rank:$step "$T"
    check_pass "setup fails on rank $rank at step $step: PASS" t_allreduce 3
    check_run "setup fails on rank $rank at step $step: point-to-point on every rank" \
      lacks ": shm_\(direct\|split\), segment"
    check_run "setup fails on rank $rank at step $step: said by that rank" \
      has "no shared-memory arena on MPI_COMM_WORLD (rank $rank:"
  done
done
launch -np 2 "${V[@]}" "$T"
chunk=$(grep -o "shared-memory arena of [0-9]* bytes, chunk [0-9]*" <<<"$out" | head -1 | awk '{print $NF}')
check_pass "2 ranks, default chunk (${chunk:-none found})" t_allreduce 2
launch -np 2 "${V[@]}" -x LLRDMA_TEST_SHM_FAIL=0:4 "$T"
halved() { [ -n "$chunk" ] && has "shared-memory arena of [0-9]* bytes, chunk $((chunk / 2)) ("; }
check_run "full /dev/shm: the chunk is halved (${chunk:-?} -> $((${chunk:-0} / 2)) on 2 ranks)" halved
check_pass "full /dev/shm: PASS" t_allreduce 2
check "nothing left in /dev/shm" test "$(leftovers)" -le "$before"
# Waits by what the process may run on: twice as many ranks as online CPUs
# with mpi_yield_when_idle 0 (what a cpuset or CPU quota looks like to
# mpirun) yield at once; the knobs set the policy otherwise.  The arena's
# Allreduce still runs (the plan line) and is right (--verify exits 0).
ncpu=$(getconf _NPROCESSORS_ONLN)
over=$((2 * ncpu > 8 ? 8 : 2 * ncpu))
if [ "$over" -gt "$ncpu" ]; then
  launch -np "$over" --mca mpi_yield_when_idle 0 --mca coll_llrdma_verbose 10 \
    "$top_builddir/llrdma-bench" allreduce --sizes 64,64K --iters 20 --warmup 2 --verify
  check "$over ranks on $ncpu CPUs: the Allreduce ran, verified (exit $rc)" \
    eval '[ "$rc" -eq 0 ] && has "all results correct" && has ": shm_direct, segment"'
  check_run "$over ranks on $ncpu CPUs: waits yield at once, said with the counts" \
    count "waits spin 0 us, then yield, then sleep (oversubscribed: $over ranks here, $ncpu online CPUs" "$over"
else
  skip "oversubscribed waits" "cannot start more ranks than $ncpu CPUs here"
fi
launch -np 2 --mca coll_llrdma_verbose 5 --mca coll_llrdma_wait_spin_us 250 \
  --mca coll_llrdma_wait_sleep_ms 0 "$T"
check_pass "2 ranks, wait knobs set: PASS" t_allreduce 2
check_run "the knobs took effect: spin 250 us, never sleep" \
  has "waits spin 250 us, then yield ("
finish

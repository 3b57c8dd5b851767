#!/usr/bin/env bash
# coll/llrdma's shared-memory arena through real Open MPI: both shm algorithms
# forced, many rounds (64-byte chunks), the arena switched off, every setup
# failure (open, reserve, map, on the creating rank and on another) falling
# back to point-to-point on every rank with the reason said by that rank, a
# full /dev/shm halving the chunk, and nothing left behind in /dev/shm.
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_allreduce"
V=(--mca coll_llrdma_verbose 10)
leftovers() { ls /dev/shm 2>/dev/null | grep -c '^llrdma-coll-' || true; }
has() { grep -q -- "$1" <<<"$out"; }
lacks() { ! grep -q -- "$1" <<<"$out"; }
before=$(leftovers)

for alg in shm_direct shm_split; do
  for n in 2 3 4; do
    out=$(mpi -np $n "${V[@]}" --mca coll_llrdma_allreduce_algorithm $alg "$T" 2>&1)
    check "$n ranks, $alg forced: PASS" has "t_allreduce: PASS"
    check "$n ranks, $alg forced: ran" has ": $alg, segment"
  done
done
out=$(mpi -np 3 "${V[@]}" "$T" 2>&1)
check "3 ranks, planner: PASS" has "t_allreduce: PASS"
check "3 ranks, planner: shm_direct for small vectors" has ": shm_direct, segment"
check "3 ranks, planner: shm_split above" has ": shm_split, segment"
check "3 ranks: the arena was set up" has "shared-memory arena of [0-9]* bytes, chunk"
out=$(mpi -np 4 --mca coll_llrdma_shm_chunk_size 64 "$T" 2>&1)
check "4 ranks, 64-byte chunks (many rounds per call)" has "t_allreduce: PASS"
out=$(mpi -np 3 "${V[@]}" --mca coll_llrdma_shm 0 "$T" 2>&1)
check "arena off: PASS" has "t_allreduce: PASS"
check "arena off: coll/llrdma ran" has "coll:llrdma: allreduce .* bytes"
check "arena off: no shm algorithm" lacks ": shm_\(direct\|split\), segment"

for rank in 0 1; do
  for step in 1 2 3; do
    out=$(mpi -np 3 "${V[@]}" -x LLRDMA_TEST_SHM_FAIL=$rank:$step "$T" 2>&1)
    check "setup fails on rank $rank at step $step: PASS" has "t_allreduce: PASS"
    check "setup fails on rank $rank at step $step: point-to-point on every rank" lacks ": shm_\(direct\|split\), segment"
    check "setup fails on rank $rank at step $step: said by that rank" \
      has "no shared-memory arena on MPI_COMM_WORLD (rank $rank:"
  done
done
out=$(mpi -np 2 "${V[@]}" "$T" 2>&1)
chunk=$(grep -o "shared-memory arena of [0-9]* bytes, chunk [0-9]*" <<<"$out" | head -1 | awk '{print $NF}')
out=$(mpi -np 2 "${V[@]}" -x LLRDMA_TEST_SHM_FAIL=0:4 "$T" 2>&1)
check "full /dev/shm: the chunk is halved (${chunk:-?} -> $((${chunk:-0} / 2)) on 2 ranks)" \
  has "shared-memory arena of [0-9]* bytes, chunk $((${chunk:-0} / 2)) ("
check "full /dev/shm: PASS" has "t_allreduce: PASS"
check "nothing left in /dev/shm" test "$(leftovers)" -le "$before"
finish

#!/usr/bin/env bash
# coll/llrdma's GPU path through Open MPI on any machine: libfakegpu.so stands
# in for libcuda.so.1 and libllrdma_cuda.so (tests/fakegpu/fakegpu.c), with
# device memory the CPU cannot touch.  1-4 ranks, every algorithm forced,
# fallbacks, an injected failure, first through PML staging (coll_llrdma_shm 0),
# then through the shared-memory arena; plus: a process with device buffers but
# no loadable libllrdma_cuda.so gets an MPI error naming the cause, not a crash.
# Every rank judges its own results (tests/mpi/env.sh: check_pass).
. ./tests/mpi/env.sh
T="$top_builddir/tests/fakegpu/t_allreduce_fakegpu"
P=t_allreduce_fakegpu
FAKE="$top_builddir/tests/fakegpu/.libs/libfakegpu.so"
mkdir -p "$LLRDMA_TEST_HOME/lib"
ln -sf "$FAKE" "$LLRDMA_TEST_HOME/lib/libcuda.so.1"
export LD_LIBRARY_PATH="$LLRDMA_TEST_HOME/lib:$LD_LIBRARY_PATH"
export LLRDMA_CUDA_LIB="$FAKE"
V=(--mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_shm 0)

check "libfakegpu.so built" test -f "$FAKE"
for n in 1 2 3 4; do
  launch -np $n "${V[@]}" "$T"
  check_pass "$n ranks: PASS" $P $n
  [ $n -eq 1 ] || check_run "$n ranks: the GPU path ran" has "; GPU buffers"
  [ $n -eq 1 ] || check_run "$n ranks: managed buffers took the GPU path" has "; managed buffers"
done
for alg in recursive_doubling rabenseifner ring; do
  launch -np 3 "${V[@]}" --mca coll_llrdma_allreduce_algorithm $alg \
    --mca coll_llrdma_allreduce_segment_size 1K "$T"
  check_pass "3 ranks, $alg forced, 1K segments: PASS" $P 3
  check_run "3 ranks, $alg on GPU buffers" has ": $alg, segment .*; GPU buffers"
done
launch -np 2 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_shm 0 -x FAKEGPU_FAIL_AT=3 \
  "$T" --fault 3
check_pass "injected failure: that call fails, the next works" $P 2
check_run "injected failure: reported with the cause" \
  has "coll:llrdma: MPI_Allreduce on MPI_COMM_WORLD (GPU buffers) failed: fakegpu: injected"

# Without libllrdma_cuda.so the GPU path stays unavailable: every call on
# device buffers fails (--fault-sticky 1), none crashes or hangs.
LLRDMA_CUDA_LIB=/nonexistent/libllrdma_cuda.so launch -np 2 -x LLRDMA_CUDA_LIB \
  -x FAKEGPU_LIB="$FAKE" "$T" --fault-sticky 1
check_pass "no libllrdma_cuda.so: every call on device buffers fails" $P 2
check_run "no libllrdma_cuda.so: an MPI error that says why" \
  has "got GPU buffers, but the GPU path is unavailable: cannot load /nonexistent"
# The shared-memory arena (default on one node): device data moves only by
# copies into and out of the pinned arena, never staged for the PML.
A=(--mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 -x FAKEGPU_EXPECT_STAGING=0)
for n in 2 3 4; do
  launch -np $n "${A[@]}" "$T"
  check_pass "$n ranks, arena: PASS" $P $n
  check_run "$n ranks, arena: shm_split on GPU buffers" has ": shm_split, segment .*; GPU buffers"
  check_run "$n ranks, arena: shm_direct on GPU buffers" has ": shm_direct, segment .*; GPU buffers"
done
launch -np 3 "${A[@]}" --mca coll_llrdma_shm_chunk_size 256 "$T"
check_pass "3 ranks, arena with 256-byte chunks (many rounds): PASS" $P 3
launch -np 2 "${A[@]}" -x FAKEGPU_NO_REGISTER=1 "$T"
check_pass "2 ranks, arena that CUDA will not pin: PASS" $P 2
check_run "2 ranks, arena not pinned: said why" \
  has "arena not pinned (fakegpu: host_register refused"
launch -np 3 "${A[@]}" -x FAKEGPU_NOT_MAPPED=1 "$T"
check_pass "3 ranks, arena pinned for copies only (CPU fold): PASS" $P 3
check_run "3 ranks, arena pinned for copies only: said so" \
  has "arena pinned for copies only (fakegpu: pinned, not mapped"
# Across (test-only) nodes the hierarchical schedule runs on host memory:
# device vectors go whole to the host and back, whatever their size.
launch -np 4 --mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 \
  --mca coll_llrdma_node_split 2 -x FAKEGPU_EXPECT_STAGING=0 "$T"
check_pass "2+2 nodes (node_split), GPU buffers: PASS" $P 4
check_run "2+2 nodes: hierarchical on device buffers, copied whole" \
  has ": hierarchical, 2 nodes, .*; GPU buffers"
launch -np 3 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_STAGING=0 -x FAKEGPU_DEVICE_KEY=7 "$T"
check_pass "3 ranks on one GPU: PASS" $P 3
check_run "3 ranks on one GPU: detected, vectors copied whole" \
  has "shares its GPU with 2 other rank(s): device vectors are copied whole"
# Injected on one rank: on both, the second rank's third sync could fall in the
# next call (its third call may end before it syncs), a failure of its own.
launch -np 1 --mca coll_llrdma_gpu_stage_max 0 "$T" --fault 3 \
  : -np 1 --mca coll_llrdma_gpu_stage_max 0 -x FAKEGPU_FAIL_SYNC_AT=3 "$T" --fault 3
check_pass "arena, injected failure: that call fails, the next one works on a fresh arena" $P 2
check_run "arena, injected failure: reported with the cause" \
  has "(GPU buffers) failed: fakegpu: injected sync failure"

# Default threshold: small device vectors staged whole, reduced on the host.
launch -np 3 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_STAGING=0 "$T"
check_pass "3 ranks, default staging threshold: PASS" $P 3
check_run "3 ranks: small device vectors took the host path after a whole copy" \
  has "; host buffers"
finish

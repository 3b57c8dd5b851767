#!/usr/bin/env bash
# coll/llrdma's GPU path through Open MPI on any machine: libfakegpu.so stands
# in for libcuda.so.1 and libllrdma_cuda.so (tests/fakegpu/fakegpu.c), with
# device memory the CPU cannot touch.  1-4 ranks, every algorithm forced,
# fallbacks, an injected failure, first through PML staging (coll_llrdma_shm 0),
# then through the shared-memory arena; plus: a process with device buffers but
# no loadable libllrdma_cuda.so gets an MPI error naming the cause, not a crash.
. ./tests/mpi/env.sh
T="$top_builddir/tests/fakegpu/t_allreduce_fakegpu"
FAKE="$top_builddir/tests/fakegpu/.libs/libfakegpu.so"
mkdir -p "$LLRDMA_TEST_HOME/lib"
ln -sf "$FAKE" "$LLRDMA_TEST_HOME/lib/libcuda.so.1"
export LD_LIBRARY_PATH="$LLRDMA_TEST_HOME/lib:$LD_LIBRARY_PATH"
export LLRDMA_CUDA_LIB="$FAKE"
V=(--mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_shm 0)

for n in 1 2 3 4; do
  out=$(mpi -np $n "${V[@]}" "$T" 2>&1)
  check "$n ranks: PASS" grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
  [ $n -eq 1 ] || check "$n ranks: the GPU path ran" grep -q "; GPU buffers" <<<"$out"
  [ $n -eq 1 ] || check "$n ranks: managed buffers took the GPU path" \
    grep -q "; managed buffers" <<<"$out"
  grep -q "t_allreduce_fakegpu: PASS" <<<"$out" || sed 's/^/# /' <<<"$out" | grep -v "coll:llrdma: allreduce" | tail -20
done
for alg in recursive_doubling rabenseifner ring; do
  out=$(mpi -np 3 "${V[@]}" --mca coll_llrdma_allreduce_algorithm $alg \
        --mca coll_llrdma_allreduce_segment_size 1K "$T" 2>&1)
  check "3 ranks, $alg forced, 1K segments: PASS" grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
  check "3 ranks, $alg on GPU buffers" grep -q ": $alg, segment .*; GPU buffers" <<<"$out"
done
out=$(mpi -np 2 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_shm 0 -x FAKEGPU_FAIL_AT=3 \
      "$T" --fault 3 2>&1)
check "injected failure: that call fails, the next works" \
  grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
check "injected failure: reported with the cause" \
  grep -q "coll:llrdma: MPI_Allreduce on MPI_COMM_WORLD (GPU buffers) failed: fakegpu: injected" \
  <<<"$out"

out=$(LLRDMA_CUDA_LIB=/nonexistent/libllrdma_cuda.so mpi -np 2 -x LLRDMA_CUDA_LIB \
      -x FAKEGPU_LIB="$FAKE" "$T" --fault 1 2>&1)
check "no libllrdma_cuda.so: an MPI error that says why" \
  grep -q "got GPU buffers, but the GPU path is unavailable: cannot load /nonexistent" <<<"$out"
# The shared-memory arena (default on one node): device data moves only by
# copies into and out of the pinned arena, never staged for the PML.
A=(--mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 -x FAKEGPU_EXPECT_STAGING=0)
for n in 2 3 4; do
  out=$(mpi -np $n "${A[@]}" "$T" 2>&1)
  check "$n ranks, arena: PASS" grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
  check "$n ranks, arena: shm_split on GPU buffers" grep -q ": shm_split, segment .*; GPU buffers" <<<"$out"
  check "$n ranks, arena: shm_direct on GPU buffers" grep -q ": shm_direct, segment .*; GPU buffers" <<<"$out"
  grep -q "t_allreduce_fakegpu: PASS" <<<"$out" || sed 's/^/# /' <<<"$out" | grep -v "coll:llrdma: allreduce" | tail -20
done
out=$(mpi -np 3 "${A[@]}" --mca coll_llrdma_shm_chunk_size 256 "$T" 2>&1)
check "3 ranks, arena with 256-byte chunks (many rounds): PASS" \
  grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
out=$(mpi -np 2 "${A[@]}" -x FAKEGPU_NO_REGISTER=1 "$T" 2>&1)
check "2 ranks, arena that CUDA will not pin: PASS" grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
check "2 ranks, arena not pinned: said why" \
  grep -q "arena not pinned (fakegpu: host_register refused" <<<"$out"
out=$(mpi -np 3 "${A[@]}" -x FAKEGPU_NOT_MAPPED=1 "$T" 2>&1)
check "3 ranks, arena pinned for copies only (CPU fold): PASS" \
  grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
check "3 ranks, arena pinned for copies only: said so" \
  grep -q "arena pinned for copies only (fakegpu: pinned, not mapped" <<<"$out"
out=$(mpi -np 3 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_STAGING=0 -x FAKEGPU_DEVICE_KEY=7 "$T" 2>&1)
check "3 ranks on one GPU: PASS" grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
check "3 ranks on one GPU: detected, vectors copied whole" \
  grep -q "shares its GPU with 2 other rank(s): device vectors are copied whole" <<<"$out"
out=$(mpi -np 2 --mca coll_llrdma_gpu_stage_max 0 -x FAKEGPU_FAIL_SYNC_AT=3 "$T" \
      --fault-sticky 3 2>&1)
check "arena, injected failure: that call and every later one fail, none hangs" \
  grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
check "arena, injected failure: reported with the cause" \
  grep -q "(GPU buffers) failed: fakegpu: injected sync failure" <<<"$out"

# Default threshold: small device vectors staged whole, reduced on the host.
out=$(mpi -np 3 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_STAGING=0 "$T" 2>&1)
check "3 ranks, default staging threshold: PASS" grep -q "t_allreduce_fakegpu: PASS" <<<"$out"
check "3 ranks: small device vectors took the host path after a whole copy" \
  grep -q "; host buffers" <<<"$out"
finish

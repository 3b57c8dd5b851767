#!/usr/bin/env bash
# coll/llrdma's GPU path through Open MPI on any machine: libfakegpu.so stands
# in for libcuda.so.1 and libllrdma_cuda.so (tests/fakegpu/fakegpu.c), with
# device memory the CPU cannot touch.  1-4 ranks, every algorithm forced,
# fallbacks, an injected failure, first through PML staging (coll_llrdma_shm 0),
# then through the shared-memory arena; plus: a process with device buffers but
# no loadable libllrdma_cuda.so gets an MPI error naming the cause, not a crash.
# Every rank judges its own results (tests/mpi/env.sh: check_pass).
. ./tests/mpi/env.sh
. "$top_srcdir/tests/fakegpu/env.sh"
V=(--mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_shm 0)
# The checks up to the GPU peer path's own test the arena path: peer path off
# (a --mca below overrides this).
export OMPI_MCA_coll_llrdma_gpu_peer=off

# MPI_DOUBLE_COMPLEX, MPI_LOGICAL and MPI_2REAL reduced on the (fake) GPU.
new_types_on_gpu() {
  has "(double_complex prod) on .*; GPU buffers" && has "(logical32 land) on .*; GPU buffers" &&
    has "(2float maxloc) on .*; GPU buffers"
}

check "libfakegpu.so built" test -f "$FAKE"
for n in 1 2 3 4; do
  launch -np $n "${V[@]}" "$T"
  check_pass "$n ranks: PASS" $P $n
  [ $n -eq 1 ] || check_run "$n ranks: the GPU path ran" has "; GPU buffers"
  [ $n -eq 1 ] || check_run "$n ranks: managed buffers took the GPU path" has "; managed buffers"
  [ $n -eq 1 ] || check_run "$n ranks: complex and Fortran handles took the GPU path" new_types_on_gpu
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
# Across (test-only) nodes with the inter-node step over the PML (no
# btl/llrdma here), device vectors go whole to the host and back, whatever
# their size (the GPU-direct step needs btl/llrdma's RDMA:
# tests/softroce/test-hier-gpu.sh).
launch -np 4 --mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_stage_max 0 \
  --mca coll_llrdma_node_split 2 -x FAKEGPU_EXPECT_STAGING=0 "$T"
check_pass "2+2 nodes (node_split), GPU buffers: PASS" $P 4
check_run "2+2 nodes: hierarchical on device buffers, copied whole (host-copy)" \
  eval 'has ": hierarchical, 2 nodes, .*; GPU buffers" && has "device vector, host-copy" &&
    lacks "device vector, gpu-direct"'
# Across nodes, rank 1 (node 0) cannot stage its input in its third call
# (its 5th whole-vector copy: two per call, in and out):
# the failure reaches node 1 through the inter-node step's messages, so all
# four ranks fail that call instead of node 1 waiting for good, and (the
# node arenas are not rebuilt across nodes) every later call fails too.
H=(--mca coll_llrdma_verbose 1 --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_node_split 2
  -x FAKEGPU_EXPECT_STAGING=0)
launch -np 1 "${H[@]}" "$T" --fault-sticky 3 : -np 1 "${H[@]}" -x FAKEGPU_FAIL_COPY_AT=5 "$T" \
  --fault-sticky 3 : -np 2 "${H[@]}" "$T" --fault-sticky 3
check_pass "2+2 nodes, rank 1 cannot stage its input in call 3: every rank fails it, none hangs" \
  $P 4
check_run "2+2 nodes: node 1 learned it from the inter-node step's messages" \
  has "another rank failed in this call (its messages said so)"
# The same with rank 0 entering call 3 late, after rank 1 broke their node's
# arena: it must still carry the failure across (a fresh-clone run hung here).
launch -np 1 "${H[@]}" -x T_FAULT_LATE=1 "$T" --fault-sticky 3 : -np 1 "${H[@]}" \
  -x FAKEGPU_FAIL_COPY_AT=5 "$T" --fault-sticky 3 : -np 2 "${H[@]}" "$T" --fault-sticky 3
check_pass "2+2 nodes, rank 0 enters the failed call late: every rank fails it, none hangs" $P 4
launch -np 3 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_STAGING=0 -x FAKEGPU_DEVICE_KEY=7 "$T"
check_pass "3 ranks on one GPU: PASS" $P 3
check_run "3 ranks on one GPU: detected, vectors copied whole" \
  has "shares its GPU with 2 other rank(s): device vectors are copied whole"
# Injected on one rank: on both, the second rank's third sync could fall in the
# next call (its third call may end before it syncs), a failure of its own.
# Through the slots (lines off: one sync per call), then through the lines
# (800-byte vectors, lines up to 1K: two syncs per call, the fifth is call
# 3's first).
L0=(--mca coll_llrdma_shm_lines_max 0 --mca coll_llrdma_gpu_stage_max 0)
launch -np 1 "${L0[@]}" "$T" --fault 3 : -np 1 "${L0[@]}" -x FAKEGPU_FAIL_SYNC_AT=3 "$T" --fault 3
check_pass "arena, injected failure: that call fails, the next one works on a fresh arena" $P 2
check_run "arena, injected failure: reported with the cause" \
  has "(GPU buffers) failed: fakegpu: injected sync failure"
L1=(--mca coll_llrdma_shm_lines_max 1K --mca coll_llrdma_gpu_stage_max 0)
launch -np 1 "${L1[@]}" --mca coll_llrdma_verbose 5 "$T" --fault 3 \
  : -np 1 "${L1[@]}" -x FAKEGPU_FAIL_SYNC_AT=5 "$T" --fault 3
check_pass "arena's lines, injected failure: that call fails, the next one works" $P 2
check_run "arena's lines, injected failure: reported with the cause" \
  has "(GPU buffers) failed: fakegpu: injected sync failure"
check_run "arena's lines, injected failure: the calls ran in lines" \
  has "rounds, [1-9][0-9]* of them in lines"

# Default threshold: small device vectors staged whole, reduced on the host.
launch -np 3 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_STAGING=0 "$T"
check_pass "3 ranks, default staging threshold: PASS" $P 3
check_run "3 ranks: small device vectors took the host path after a whole copy" \
  has "; host buffers"
# The GPU peer path (CUDA IPC between the ranks' GPUs; the fake maps other
# processes' device memory and refuses or catches stale handles).
PP=(--mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_peer auto --mca coll_llrdma_gpu_peer_min 0)
for n in 2 3 4; do
  launch -np $n "${PP[@]}" -x FAKEGPU_EXPECT_PEER=1 "$T" --peer
  check_pass "$n ranks, GPU peer path: bitwise left fold, handles mapped once per allocation, a buffer freed and reallocated at the same address remapped" $P $n
  check_run "$n ranks: the GPU peer path ran" has "GPU peer path (CUDA IPC)"
done
# The H200 matrix-4 hang: split communicators (each on an arena of its own)
# with host calls between the device calls; ranks that disagreed on which
# calls try the peer path read each other's data as records.
for mode in auto force; do
  # shellcheck disable=SC2046  # no word or two: -x FAKEGPU_DEVICE_KEY=7
  launch -np 4 --mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_peer $mode \
    --mca coll_llrdma_gpu_peer_min 0 -x FAKEGPU_EXPECT_PEER=1 \
    $([ $mode = force ] && echo -x FAKEGPU_DEVICE_KEY=7) "$T" --peer-split
  check_pass "4 ranks, split communicators, peer path $mode: every device call took it, no host call did" $P 4
  check_run "4 ranks, split communicators, $mode: no rank read a record of another call" \
    lacks "held no peer record of this call"
done
launch -np 3 "${PP[@]}" -x FAKEGPU_EXPECT_STAGING=0 "$T"
check_pass "3 ranks, the memory-kind matrix with the GPU peer path on: PASS" $P 3
check_run "3 ranks, matrix: device buffers took the GPU peer path" has "GPU peer path (CUDA IPC)"
check_run "3 ranks, matrix: a call with managed memory fell back, said once" \
  count "did not take the GPU peer path (managed memory" 3
launch -np 2 "${PP[@]}" -x FAKEGPU_EXPECT_PEER=0 -x FAKEGPU_NO_PEER=1 "$T" --peer
check_pass "2 ranks, GPUs without peer access: arena path, PASS" $P 2
check_run "no peer access: said once per rank, for good" \
  count "never take the GPU peer path (no peer access between the GPUs" 2
launch -np 2 "${PP[@]}" -x FAKEGPU_EXPECT_PEER=0 -x FAKEGPU_DEVICE_KEY=7 "$T" --peer
check_pass "2 ranks on one GPU: arena path, PASS" $P 2
check_run "one GPU: said" has "never take the GPU peer path (ranks share a GPU, rank 1)"
launch -np 2 "${PP[@]}" -x FAKEGPU_EXPECT_PEER=0 -x FAKEGPU_DEVICE_KEY=7 -x FAKEGPU_MIG=1 \
  "$T" --peer
check_pass "2 ranks on MIG instances of one GPU: arena path, PASS" $P 2
check_run "MIG: said" has "never take the GPU peer path (ranks on MIG instances of one GPU"
launch -np 2 --mca coll_llrdma_verbose 10 --mca coll_llrdma_gpu_peer force \
  --mca coll_llrdma_gpu_peer_min 0 -x FAKEGPU_EXPECT_PEER=1 \
  -x FAKEGPU_DEVICE_KEY=7 "$T" --peer
check_pass "2 ranks on one GPU, coll_llrdma_gpu_peer force: peer path, PASS" $P 2
launch -np 2 "${PP[@]}" -x FAKEGPU_EXPECT_PEER=0 -x FAKEGPU_NO_IPC=1 "$T" --peer
check_pass "2 ranks, CUDA refuses IPC handles: arena path, PASS" $P 2
check_run "IPC refused: said with CUDA's reason" \
  has "did not take the GPU peer path (CUDA refused an IPC handle for the buffer: fakegpu: IPC"
launch -np 3 "${PP[@]}" --mca coll_llrdma_shm_chunk_size 256 -x FAKEGPU_EXPECT_PEER=0 "$T" --peer
check_pass "3 ranks, 256-byte arena chunks (no room for a record): arena path, PASS" $P 3
launch -np 2 --mca coll_llrdma_verbose 10 -x FAKEGPU_EXPECT_PEER=0 "$T" --peer
check_pass "coll_llrdma_gpu_peer off: arena path, PASS" $P 2
check_run "coll_llrdma_gpu_peer off: never tried" lacks "GPU peer path"
# Host calls and the peer path: with the driver on every rank a host call
# only stamps its placement word (the fallback is said); a rank without the
# driver (libcuda.so.1) takes the communicator off the peer path at set-up,
# for every rank, so host calls never try it.
TA="$top_builddir/tests/mpi/t_allreduce"
NO_DRIVER_LD=${LD_LIBRARY_PATH#"$LLRDMA_TEST_HOME/lib:"}
launch -np 2 "${PP[@]}" "$TA"
check_pass "2 ranks with the driver, host buffers, peer path auto: PASS" t_allreduce 2
check_run "with the driver: host calls fall back by placement" \
  has "did not take the GPU peer path (receive buffer in host memory"
launch -np 1 "${PP[@]}" "$TA" : -np 1 -x LD_LIBRARY_PATH="$NO_DRIVER_LD" "$TA"
check_pass "rank 1 without the CUDA driver: PASS" t_allreduce 2
check_run "rank 1 without the driver: said on both ranks" \
  has "no GPU peer path on this communicator: another rank has no CUDA driver"
check_run "rank 1 without the driver: it says so itself" \
  has "no GPU peer path on this communicator: this rank has no CUDA driver"
check_run "rank 1 without the driver: no call tried the peer path" \
  lacks "did not take the GPU peer path"
launch --mca coll_llrdma_verbose 10 -np 1 -x OMPI_MCA_coll_llrdma_gpu_peer=auto \
  -x FAKEGPU_EXPECT_PEER=0 "$T" --peer : -np 1 -x FAKEGPU_EXPECT_PEER=0 "$T" --peer
check_run "ranks that disagree on coll_llrdma_gpu_peer: refused, no hang" \
  has "or coll_llrdma_gpu_peer / gpu_peer_min"
finish

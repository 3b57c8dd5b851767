#!/usr/bin/env bash
# GPU tests of coll/llrdma's Allreduce (tests/gpu/t_allreduce_gpu.c): the op x
# datatype x count matrix on device buffers, memory kinds (managed,
# cudaHostRegister'ed, pinned, mixed), ranks on the host path next to ranks on
# the GPU path, large vectors and sub-communicators, with 2, 4 and 8 ranks
# sharing the node's GPUs; every algorithm forced; an injected CUDA failure;
# once under compute-sanitizer memcheck (2 ranks); and a host-only process,
# which llrdma's buffer classification must not make initialise CUDA.  Builds
# nothing: run it from a build tree after `make check` (or `make all
# tests/gpu/t_allreduce_gpu`).
# Exit 77 (skipped) without CUDA in the build or without a GPU.
. ./tests/mpi/env.sh
T="$top_builddir/tests/gpu/t_allreduce_gpu"
LOGS="${LLRDMA_GPU_LOGS:-$LLRDMA_TEST_HOME}"
if [ ! -x "$T" ]; then
  echo "SKIP: $T not built (configure found no CUDA Toolkit)"; exit 77
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU (nvidia-smi lists none)"; exit 77
fi
export LLRDMA_CUDA_LIB="$top_builddir/libllrdma_cuda.so"
export LLRDMA_TEST_TIMEOUT=${LLRDMA_TEST_TIMEOUT:-300}
V=(--mca coll_llrdma_verbose 10 -x LLRDMA_CUDA_LIB)
# A CUDA-aware Open MPI's coll/cuda (priority 78) would stage device buffers
# before coll/llrdma sees them: keep it out, this tests llrdma's own path.
if "$OMPI_INFO" 2>/dev/null | grep -q "MCA coll: cuda"; then V+=(--mca coll ^cuda); fi
# mpirun 4.1 will not start, even locally, without ssh or rsh (minimal GPU images).
command -v ssh >/dev/null || command -v rsh >/dev/null || V+=(--mca plm_rsh_agent sh)
nvidia-smi -L | sed 's/^/# /'
# Every run below reduces on the GPU at every size; the default (small vectors
# staged whole and reduced on the host) gets its own run at the end.
VSTAGED=("${V[@]}")
V+=(--mca coll_llrdma_gpu_stage_max 0)

run() { # run NAME NP ARGS... : log in $LOGS/NAME.log, PASS line and GPU path required
  local name=$1 np=$2; shift 2
  local log="$LOGS/$name.log" t0=$SECONDS
  mpi -np "$np" "${V[@]}" "$@" >"$log" 2>&1
  check "$name: PASS ($((SECONDS - t0)) s)" grep -q "t_allreduce_gpu: PASS" "$log"
  grep "t_allreduce_gpu" "$log" | grep -v "fault run" | head -5 | sed 's/^/# /'
  grep -q "t_allreduce_gpu: PASS" "$log" ||
    grep -v "coll:llrdma: allreduce" "$log" | tail -15 | sed 's/^/#   /'
}

matrix() {
  run "matrix-$1" $1 "$T"
  local log="$LOGS/matrix-$1.log"
  check "matrix-$1: device buffers took the GPU path" grep -q "; GPU buffers" "$log"
  check "matrix-$1: managed buffers took the GPU path" grep -q "; managed buffers" "$log"
  check "matrix-$1: no device pointer fell back" \
    bash -c "! grep -q 'GPU path is unavailable' '$log'"
}

# Most telling first: 2 ranks, the error path, memcheck; then 4 and 8 ranks.
matrix 2
check "matrix-2: the shared-memory arena carried GPU buffers" \
  grep -q ": shm_split, segment .*; GPU buffers" "$LOGS/matrix-2.log"
run "matrix-pml-2" 2 --mca coll_llrdma_shm 0 "$T"
check "matrix-pml-2: without the arena, GPU buffers staged through the PML" \
  bash -c "grep -q '; GPU buffers' '$LOGS/matrix-pml-2.log' && ! grep -q ': shm_' '$LOGS/matrix-pml-2.log'"
run "host-only-2" 2 "$T" --host-only
check "host-only-2: host buffers stayed on the host path" \
  bash -c "grep -q '; host buffers' '$LOGS/host-only-2.log' && ! grep -q '; GPU buffers' '$LOGS/host-only-2.log'"
log="$LOGS/fault.log"
# One device-to-host staging copy per call (recursive doubling on 2 ranks), so
# the 3rd copy is in the 3rd call.
mpi -np 2 "${V[@]}" --mca coll_llrdma_allreduce_algorithm recursive_doubling \
  -x LLRDMA_CUDA_FAIL_AT=3 "$T" --fault 3 >"$log" 2>&1
check "fault: call 3 failed, calls 1, 2 and 4 right" grep -q "t_allreduce_gpu: PASS" "$log"
check "fault: the error names the CUDA call" grep -q "failed: cudaMemcpyAsync (device to host staging; injected" "$log"
grep -E "fault run|failed:" "$log" | head -4 | sed 's/^/# /'

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
  log="$LOGS/memcheck.log"
  mpi -np 2 "${V[@]}" "$SAN" --tool memcheck --leak-check full --error-exitcode 3 "$T" --quick \
    >"$log" 2>&1
  check "memcheck: PASS" grep -q "t_allreduce_gpu: PASS" "$log"
  check "memcheck: 0 errors on both ranks" test "$(grep -c 'ERROR SUMMARY: 0 errors' "$log")" -eq 2
  grep "ERROR SUMMARY" "$log" | sed 's/^/# /'
else
  echo "ok - memcheck # SKIP compute-sanitizer not found"
fi
matrix 4
matrix 8
for alg in recursive_doubling rabenseifner ring; do
  run "quick-$alg-3" 3 --mca coll_llrdma_allreduce_algorithm $alg "$T" --quick
  check "quick-$alg-3: $alg ran on GPU buffers" grep -q ": $alg, segment .*; GPU buffers" \
    "$LOGS/quick-$alg-3.log"
done
run "ring-small-segments-5" 5 --mca coll_llrdma_allreduce_algorithm ring \
  --mca coll_llrdma_allreduce_segment_size 4K "$T"

# Default staging threshold: small device vectors take two whole copies and
# the host path, large ones the GPU path; both must give the reference result.
log="$LOGS/staged-2.log"
mpi -np 2 "${VSTAGED[@]}" "$T" >"$log" 2>&1
check "staged-2: PASS with the default coll_llrdma_gpu_stage_max" grep -q "t_allreduce_gpu: PASS" "$log"
check "staged-2: small device vectors went through the host path" grep -q "; host buffers" "$log"
finish

#!/usr/bin/env bash
# GPU tests of coll/llrdma's Allreduce (tests/gpu/t_allreduce_gpu.c): the op x
# datatype x count matrix on device buffers, memory kinds (managed,
# cudaHostRegister'ed, pinned, mixed), ranks on the host path next to ranks on
# the GPU path, large vectors and sub-communicators, with 2, 4 and 8 ranks
# sharing the node's GPUs; every algorithm forced; an injected CUDA failure;
# the GPU peer path forced on 2 ranks (LLRDMA_GPU_PEER=auto: every run with
# coll_llrdma_gpu_peer auto);
# once under compute-sanitizer memcheck (2 ranks); and a host-only process,
# which llrdma's buffer classification must not make initialise CUDA.  Builds
# nothing: run it from a build tree after `make check` (or `make all
# tests/gpu/t_allreduce_gpu`).
# Exit 77 (skipped) without CUDA in the build or without a GPU.  Every rank
# judges its own results (tests/mpi/env.sh: check_pass): exit status 0, no
# FAIL line, "t_allreduce_gpu rank R: PASS" from every rank.
. ./tests/mpi/env.sh
T="$top_builddir/tests/gpu/t_allreduce_gpu"
LOGS="${LLRDMA_GPU_LOGS:-$LLRDMA_TEST_HOME}"
# A log folder named by the caller may not exist yet (h200-arena.sh names one).
mkdir -p "$LOGS" || exit 1
if [ -z "$LLRDMA_CUDA_DIR" ]; then
  echo "SKIP: configure found no CUDA Toolkit"; exit 77
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU (nvidia-smi lists none)"; exit 77
fi
if [ ! -x "$T" ]; then # CUDA is in the build: make check builds it
  echo "not ok 1 - $T not built although configure found CUDA in $LLRDMA_CUDA_DIR"; exit 1
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
# LLRDMA_GPU_PEER=off|auto|force: coll_llrdma_gpu_peer for every run below
# (unset: the build's default); the peer-* runs set it themselves.
MODE=()
[ -n "${LLRDMA_GPU_PEER:-}" ] && MODE=(--mca coll_llrdma_gpu_peer "$LLRDMA_GPU_PEER")
NGPU=$(nvidia-smi -L | grep -c '^GPU')

# gpu_run NAME NP MPIRUN-ARGS...: launch, output also in $LOGS/NAME.log.
gpu_run() {
  local name=$1 np=$2; shift 2
  launch -np "$np" "$@"
  printf '%s\n' "$out" >"$LOGS/$name.log"
}
run() { # run NAME NP ARGS... : log in $LOGS/NAME.log, every rank's PASS required
  local name=$1 np=$2 t0=$SECONDS; shift 2
  # Open MPI refuses a parameter given twice: peer-* runs set the mode.
  if [ "${name#peer-}" = "$name" ]; then
    gpu_run "$name" "$np" "${V[@]}" ${MODE[@]+"${MODE[@]}"} "$@"
  else
    gpu_run "$name" "$np" "${V[@]}" "$@"
  fi
  check_pass "$name: PASS ($((SECONDS - t0)) s)" t_allreduce_gpu "$np"
  grep "t_allreduce_gpu" <<<"$out" | grep -v "fault run" | head -5 | sed 's/^/# /'
}

matrix() {
  run "matrix-$1" $1 "$T"
  check_run "matrix-$1: device buffers took the GPU path" has "; GPU buffers"
  check_run "matrix-$1: managed buffers took the GPU path" has "; managed buffers"
  check_run "matrix-$1: no device pointer fell back" lacks "GPU path is unavailable"
  check_run "matrix-$1: every rank agreed on which calls try the GPU peer path" \
    lacks "held no peer record of this call"
  if has "GPU peer path (" && [ "$NGPU" -lt "$1" ]; then
    check_run "matrix-$1: ranks sharing a GPU never took the GPU peer path, said so" \
      has "never take the GPU peer path (ranks share a GPU"
  fi
}

# Most telling first: 2 ranks, the error path, memcheck; then 4 and 8 ranks.
matrix 2
check_run "matrix-2: the shared-memory arena carried GPU buffers" \
  has ": shm_split, segment .*; GPU buffers"
# The GPU peer path forced on 2 ranks (CUDA IPC handles, interprocess events
# and the fused kernel work between ranks of one GPU too): bitwise the host
# path's results; managed memory falls back to the arena, said.
run "peer-force-2" 2 --mca coll_llrdma_gpu_peer force --mca coll_llrdma_gpu_peer_min 0 "$T"
check_run "peer-force-2: device buffers took the GPU peer path" has "GPU peer path (CUDA IPC)"
check_run "peer-force-2: managed memory fell back to the arena, said" \
  has "did not take the GPU peer path (managed memory"
check_run "peer-force-2: every rank agreed on which calls try it" \
  lacks "held no peer record of this call"
run "matrix-pml-2" 2 --mca coll_llrdma_shm 0 "$T"
staged_pml() { has "; GPU buffers" && lacks ": shm_"; }
check_run "matrix-pml-2: without the arena, GPU buffers staged through the PML" staged_pml
run "host-only-2" 2 "$T" --host-only
host_path() { has "; host buffers" && lacks "; GPU buffers"; }
check_run "host-only-2: host buffers stayed on the host path" host_path
# One device-to-host staging copy per call (recursive doubling on 2 ranks), so
# the 3rd copy is in the 3rd call.
gpu_run fault 2 "${V[@]}" --mca coll_llrdma_allreduce_algorithm recursive_doubling \
  -x LLRDMA_CUDA_FAIL_AT=3 "$T" --fault 3
check_pass "fault: call 3 failed, calls 1, 2 and 4 right" t_allreduce_gpu 2
check_run "fault: the error names the CUDA call" \
  has "failed: cudaMemcpyAsync (device to host staging; injected"
grep -E "fault run|failed:" <<<"$out" | head -4 | sed 's/^/# /'

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
  gpu_run memcheck 2 "${V[@]}" "$SAN" --tool memcheck --leak-check full --error-exitcode 3 \
    "$T" --quick
  check_pass "memcheck: PASS" t_allreduce_gpu 2
  check_run "memcheck: 0 errors on both ranks" count 'ERROR SUMMARY: 0 errors' 2
  grep "ERROR SUMMARY" <<<"$out" | sed 's/^/# /'
else
  skip "memcheck" "compute-sanitizer not found"
fi
matrix 4
matrix 8
for alg in recursive_doubling rabenseifner ring; do
  run "quick-$alg-3" 3 --mca coll_llrdma_allreduce_algorithm $alg "$T" --quick
  check_run "quick-$alg-3: $alg ran on GPU buffers" has ": $alg, segment .*; GPU buffers"
done
run "ring-small-segments-5" 5 --mca coll_llrdma_allreduce_algorithm ring \
  --mca coll_llrdma_allreduce_segment_size 4K "$T"

# Default staging threshold: small device vectors take two whole copies and
# the host path, large ones the GPU path; both must give the reference result.
gpu_run staged-2 2 "${VSTAGED[@]}" "$T"
check_pass "staged-2: PASS with the default coll_llrdma_gpu_stage_max" t_allreduce_gpu 2
check_run "staged-2: small device vectors went through the host path" has "; host buffers"

# btl/llrdma's GPU registration against the real driver (the NIC is the fake
# device: no NIC here reads GPU memory).  CUDA maps memory where ASan's
# shadow gap would be protected.
D="$top_builddir/tests/gpu/t_btl_dmabuf"
BTL_WHY=""
[ -e "$top_builddir/.libs/mca_btl_llrdma.so" ] ||
  BTL_WHY="btl/llrdma not built here (configure found no librdmacm; contrib/bench/h200-lib.sh adds it)"
if [ -x "$D" ]; then
  capture env ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 timeout 120 "$D"
  printf '%s\n' "$out" >"$LOGS/btl-dmabuf.log"
  check_run "btl-dmabuf: dma-buf export and registration of cudaMalloc memory" \
    has "^PASS: t_btl_dmabuf"
  grep '^#' <<<"$out" | sed 's/^/# /'
elif [ -n "$BTL_WHY" ]; then
  skip "btl-dmabuf" "$BTL_WHY"
else
  not_ok "btl-dmabuf: $D not built (make tests/gpu/t_btl_dmabuf)"
fi
# This machine has no RDMA device: the BTL reports why GPU memory is not
# registered, and GPU jobs still run (every run above).
if [ -z "$BTL_WHY" ]; then
  launch -np 2 "${V[@]}" --mca btl_llrdma_size_hint 16K "$CHECK"
  printf '%s\n' "$out" >"$LOGS/check.log"
  check_run "llrdma-check: gpu_rdma says none (no RDMA device)" has "gpu_rdma: none (no RDMA device)"
else
  skip "llrdma-check gpu_rdma" "$BTL_WHY"
fi
finish

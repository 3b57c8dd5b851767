#!/usr/bin/env bash
# The GPU suite (tests/gpu/run-gpu-tests.sh) on a device machine from a
# `make dist` tarball, every run with coll_llrdma_gpu_peer=$LLRDMA_GPU_PEER
# (default auto): the gate for the peer path's default.  Each mpirun has the
# suite's own time limit (LLRDMA_TEST_TIMEOUT), so a hang costs that, not the
# session.  Logs under $OUT.
#   bash contrib/bench/h200-gpu-suite.sh llrdma-*.tar.gz
set -u
tarball=$(readlink -f "$1")
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/gl"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
grep -q single_copy /etc/openmpi/openmpi-mca-params.conf 2>/dev/null ||
  printf 'btl_vader_single_copy_mechanism = none\n' >> /etc/openmpi/openmpi-mca-params.conf
# shellcheck source=contrib/bench/h200-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/h200-lib.sh"
add_rdmacm_debs
mapfile -t json_args < <(json_configure_args)
mapfile -t progs < <(gpu_test_programs)
work=/tmp/llrdma-suite; rm -rf "$work"; mkdir -p "$work"; tar -xzf "$tarball" -C "$work"
cd "$work"/llrdma-* || exit 1
export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
{ ./configure --prefix="$work/inst" --with-cuda=/usr/local/cuda "${json_args[@]}" && make -j"$(nproc)" &&
  make -j"$(nproc)" "${progs[@]}"; } > "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "=== built ($((SECONDS - t0)) s)"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; mpirun --version | head -1
  nproc; uptime; } > "$OUT/machine.txt" 2>&1
LLRDMA_GPU_PEER=${LLRDMA_GPU_PEER:-auto} LLRDMA_GPU_LOGS="$OUT/gl" \
  LLRDMA_TEST_TIMEOUT=${LLRDMA_TEST_TIMEOUT:-90} bash tests/gpu/run-gpu-tests.sh > "$OUT/gpu-tests.txt" 2>&1
rc=$?
echo "=== gpu suite rc=$rc ($((SECONDS - t0)) s)"
grep -c "^ok" "$OUT/gpu-tests.txt"; grep -A12 "^not ok" "$OUT/gpu-tests.txt" | head -60
tar czf "$OUT/gpu-logs.tar.gz" -C "$OUT" gl && rm -rf "$OUT/gl" # few files come back
exit $rc

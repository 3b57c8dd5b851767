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
# The device machine has libibverbs-dev but not librdmacm-dev, so btl/llrdma
# would not be built.  LLRDMA_RDMACM_DEBS names a folder with librdmacm1 and
# librdmacm-dev .debs (`apt-get download` on Debian 12): headers and library
# are added where missing, never replacing what the system has.
if [ -n "${LLRDMA_RDMACM_DEBS:-}" ] && [ ! -e /usr/include/rdma/rdma_cma.h ]; then
  x=/tmp/rdmacm-x; rm -rf "$x"; mkdir -p "$x"
  for f in "$LLRDMA_RDMACM_DEBS"/*.deb; do dpkg -x "$f" "$x"; done
  lib=/usr/lib/x86_64-linux-gnu
  cp -rn "$x/usr/include/." /usr/include/
  cp -an "$x$lib/"librdmacm.so.1* "$lib/" 2>/dev/null
  [ -e "$lib/librdmacm.so" ] || ln -s librdmacm.so.1 "$lib/librdmacm.so"
  ldconfig
  echo "=== librdmacm headers added from $LLRDMA_RDMACM_DEBS (system library: $(readlink -f $lib/librdmacm.so.1))"
fi
work=/tmp/llrdma-suite; rm -rf "$work"; mkdir -p "$work"; tar -xzf "$tarball" -C "$work"
cd "$work"/llrdma-* || exit 1
export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
{ ./configure --prefix="$work/inst" --with-cuda=/usr/local/cuda && make -j"$(nproc)" &&
  make -j"$(nproc)" tests/gpu/t_allreduce_gpu tests/gpu/t_btl_dmabuf; } > "$OUT/build.log" 2>&1 ||
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

# shellcheck shell=bash
# Sourced by the h200-*.sh scripts (bash).
#
# add_rdmacm_debs: the device machine has libibverbs-dev but not
# librdmacm-dev, so btl/llrdma (and tests/gpu/t_btl_dmabuf) would not be
# built.  LLRDMA_RDMACM_DEBS names a folder with librdmacm1 and librdmacm-dev
# .debs (`apt-get download` on Debian 12): headers and library are added
# where missing, never replacing what the system has.
add_rdmacm_debs() {
  [ -n "${LLRDMA_RDMACM_DEBS:-}" ] && [ ! -e /usr/include/rdma/rdma_cma.h ] || return 0
  local x=/tmp/rdmacm-x lib=/usr/lib/x86_64-linux-gnu f
  rm -rf "$x"; mkdir -p "$x"
  for f in "$LLRDMA_RDMACM_DEBS"/*.deb; do dpkg -x "$f" "$x"; done
  cp -rn "$x/usr/include/." /usr/include/
  cp -an "$x$lib/"librdmacm.so.1* "$lib/" 2>/dev/null
  [ -e "$lib/librdmacm.so" ] || ln -s librdmacm.so.1 "$lib/librdmacm.so"
  ldconfig
  echo "=== librdmacm headers added from $LLRDMA_RDMACM_DEBS (system library: $(readlink -f $lib/librdmacm.so.1))"
}

# gpu_test_programs: the programs tests/gpu/run-gpu-tests.sh runs (make
# targets); t_btl_dmabuf only where btl/llrdma can be built (librdmacm).
gpu_test_programs() {
  echo tests/gpu/t_allreduce_gpu
  [ -e /usr/include/rdma/rdma_cma.h ] && echo tests/gpu/t_btl_dmabuf
  return 0
}

# shellcheck shell=bash
# Sourced by the h200-*.sh scripts (bash).
#
# add_rdmacm_debs: the device machine has libibverbs-dev but not
# librdmacm-dev, so btl/llrdma (and tests/gpu/t_btl_dmabuf) would not be
# built.  LLRDMA_RDMACM_DEBS names a folder with librdmacm1 and librdmacm-dev
# .debs (`apt-get download` on Debian 12): headers and library are added
# where missing, never replacing what the system has.  Only librdmacm*.deb
# are unpacked: the same folder may carry nlohmann-json3-dev (below), which
# is not copied into the system.
add_rdmacm_debs() {
  [ -n "${LLRDMA_RDMACM_DEBS:-}" ] && [ ! -e /usr/include/rdma/rdma_cma.h ] || return 0
  local x=/tmp/rdmacm-x lib=/usr/lib/x86_64-linux-gnu f
  rm -rf "$x"; mkdir -p "$x"
  for f in "$LLRDMA_RDMACM_DEBS"/librdmacm*.deb; do dpkg -x "$f" "$x"; done
  cp -rn "$x/usr/include/." /usr/include/
  cp -an "$x$lib/"librdmacm.so.1* "$lib/" 2>/dev/null
  [ -e "$lib/librdmacm.so" ] || ln -s librdmacm.so.1 "$lib/librdmacm.so"
  ldconfig
  echo "=== librdmacm headers added from $LLRDMA_RDMACM_DEBS (system library: $(readlink -f $lib/librdmacm.so.1))"
}

# json_configure_args: configure requires nlohmann/json.hpp (nlohmann-json3-dev,
# header-only), which the device machine may lack, with no network to fetch
# it.  When /usr/include/nlohmann/json.hpp is missing, the nlohmann-json3-dev
# .deb in LLRDMA_JSON_DEBS (default: the LLRDMA_RDMACM_DEBS folder;
# `apt-get download nlohmann-json3-dev` on Debian 12, carried) is unpacked
# under /tmp and this prints the configure argument CPPFLAGS=-I<it>/usr/include
# (one line; nothing when the system has the header).  Notes go to stderr.
#   mapfile -t json_args < <(json_configure_args); ./configure ... "${json_args[@]}"
json_configure_args() {
  [ -e /usr/include/nlohmann/json.hpp ] && return 0
  local dir=${LLRDMA_JSON_DEBS:-${LLRDMA_RDMACM_DEBS:-}} x=/tmp/nlohmann-x f
  rm -rf "$x"; mkdir -p "$x"
  for f in "${dir:-/nonexistent}"/nlohmann-json3-dev_*.deb; do
    [ -e "$f" ] && dpkg -x "$f" "$x"
  done
  if [ -e "$x/usr/include/nlohmann/json.hpp" ]; then
    echo "=== nlohmann-json headers from $dir, unpacked in $x" >&2
    echo "CPPFLAGS=-I$x/usr/include"
  else
    echo "=== no /usr/include/nlohmann/json.hpp and no nlohmann-json3-dev .deb in" \
      "LLRDMA_JSON_DEBS or LLRDMA_RDMACM_DEBS ('${dir}'): configure will stop" >&2
  fi
  return 0
}

# gpu_test_programs: the programs tests/gpu/run-gpu-tests.sh runs (make
# targets); t_btl_dmabuf only where btl/llrdma can be built (librdmacm).
gpu_test_programs() {
  echo tests/gpu/t_allreduce_gpu
  [ -e /usr/include/rdma/rdma_cma.h ] && echo tests/gpu/t_btl_dmabuf
  return 0
}

#!/usr/bin/env bash
# configure: an explicitly requested dependency that cannot be met is a hard
# error naming the option and a fix; --with-ompi-component-dir=ompi resolves to
# Open MPI's own component directory.  Each case runs configure in a scratch dir.
set -u
src=$(cd "${srcdir:-.}" && pwd)
if [ -f "$src/config.status" ]; then
  echo "SKIP: the source tree is configured in place; configure cannot run from it in another dir"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/llrdma-cfg.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=0 fail=0
case_() { # DESCRIPTION EXPECTED_RC PATTERN CONFIGURE_ARGS...
  local d=$1 want=$2 pat=$3 rc=0; shift 3
  n=$((n + 1))
  (cd "$work" && "$src/configure" "$@" > out.txt 2>&1) || rc=$?
  if { [ "$want" = 0 ] && [ $rc -eq 0 ]; } || { [ "$want" != 0 ] && [ $rc -ne 0 ]; }; then
    if grep -qF -- "$pat" "$work/out.txt"; then echo "ok $n - $d"; return; fi
  fi
  fail=$((fail + 1)); echo "not ok $n - $d (exit $rc)"; tail -5 "$work/out.txt" | sed 's/^/# /'
}
case_ "--with-ompi=DIR without mpicc" 1 "--with-ompi=/nonexistent: no /nonexistent/bin/mpicc" \
  --with-ompi=/nonexistent
case_ "--with-verbs=DIR without rdma-core" 1 "--with-verbs=/nonexistent: no /nonexistent/include/infiniband/verbs.h" \
  --with-verbs=/nonexistent
case_ "--with-boost-test=DIR without Boost.Test" 1 "--with-boost-test=/nonexistent: no" \
  --with-boost-test=/nonexistent
case_ "--with-cuda=DIR without a toolkit" 1 "--with-cuda=/nonexistent: CUDA Toolkit unusable" \
  --with-cuda=/nonexistent
pkglib=$(ompi_info --path pkglibdir 2>/dev/null | sed -n 's/^ *Pkglibdir: *//p')
case_ "--with-ompi-component-dir=ompi installs into Open MPI's directory" 0 \
  "components into: $pkglib" --with-ompi-component-dir=ompi --without-cuda
echo "1..$n"
[ $fail -eq 0 ]

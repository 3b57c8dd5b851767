#!/usr/bin/env bash
# Soft-RoCE VM tier: boots contrib/softroce-vm (a QEMU guest with a real verbs
# device, rxe0) and runs tests/softroce/guest.sh inside it.  Skips (exit 77,
# with the reason) when the harness cannot run: not root, or neither QEMU nor
# apt-get to install it, or LLRDMA_SKIP_SOFTROCE=1.
set -u
top_srcdir=$(cd "${srcdir:-.}" && pwd)
top_builddir=$(pwd)
skip() { echo "SKIP: Soft-RoCE VM tier: $*"; exit 77; }

[ "${LLRDMA_SKIP_SOFTROCE:-0}" = 1 ] && skip "LLRDMA_SKIP_SOFTROCE=1"
[ "$(id -u)" = 0 ] || skip "needs root (QEMU exports / over 9p; run 'sudo make check-softroce')"
command -v qemu-system-x86_64 >/dev/null || command -v apt-get >/dev/null ||
  skip "no qemu-system-x86_64 and no apt-get to install it"

# One set of guests at a time (the two-node tier takes the same lock).
exec 9> "$top_builddir/.softroce-tier.lock"
flock 9

# The tier also proves the *installed* tools, from the staged install that
# make check made before any test started (tests/Makefile.inc says why not here).
stamp="$top_builddir/tests/softroce/stage.stamp"
[ -f "$stamp" ] || { echo "no staged install ($stamp): run this through make check"; exit 1; }
stage=$(cat "$stamp")

export LLRDMA_STAGE="$stage" LLRDMA_STAGE_BINDIR="$stage${LLRDMA_INST_BINDIR:?}" \
  LLRDMA_STAGE_LIBDIR="$stage${LLRDMA_INST_LIBDIR:?}" \
  LLRDMA_STAGE_COMPDIR="$stage${LLRDMA_INST_COMPDIR:?}"
rc=0
"$top_srcdir/contrib/softroce-vm" --rw "$top_builddir" --timeout "${LLRDMA_SOFTROCE_TIMEOUT:-1800}" \
  -- bash "$top_srcdir/tests/softroce/guest.sh" "$top_srcdir" || rc=$?
# Two devices per guest: two btl/llrdma modules per process (two-port.sh).
if [ $rc -eq 0 ]; then
  "$top_srcdir/contrib/softroce-vm" --ports 2 --rw "$top_builddir" --timeout 900 \
    -- bash "$top_srcdir/tests/softroce/two-port.sh" || rc=$?
fi
# Two NUMA nodes with a device on each: each rank uses its node's (numa-nics.sh).
if [ $rc -eq 0 ]; then
  "$top_srcdir/contrib/softroce-vm" --numa 2 --ports 2 --cpus 2 --mem 3072 --rw "$top_builddir" \
    --timeout 900 -- bash "$top_srcdir/tests/softroce/numa-nics.sh" || rc=$?
fi
# The harness's own contract: exit 3 passes through, 124 on timeout, 125 when
# the guest dies, 126 for a non-root caller (~1 min).
if [ $rc -eq 0 ]; then
  "$top_srcdir/contrib/softroce-vm-selftest" exit-codes env || rc=$?
fi
case $rc in
  0) ;;
  124) echo "not ok - the Soft-RoCE tier timed out" ;;
  125) echo "not ok - the Soft-RoCE guest died (console above)" ;;
  126) echo "not ok - softroce-vm could not start the guest" ;;
esac
exit $rc

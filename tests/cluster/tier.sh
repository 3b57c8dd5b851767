#!/usr/bin/env bash
# Two-node tier: boots `contrib/softroce-vm --nodes 2` (two QEMU guests on one
# private Ethernet segment, rxe0 on each) and runs tests/cluster/guest.sh on
# node0: MPI jobs of 2 nodes x 2 ranks over btl/llrdma.  Skips (exit 77, with
# the reason) when the harness cannot run: not root, or neither QEMU nor
# apt-get to install it, or LLRDMA_SKIP_SOFTROCE=1 or LLRDMA_SKIP_CLUSTER=1.
set -u
top_srcdir=$(cd "${srcdir:-.}" && pwd)
top_builddir=$(pwd)
skip() { echo "SKIP: two-node Soft-RoCE tier: $*"; exit 77; }

[ "${LLRDMA_SKIP_SOFTROCE:-0}" = 1 ] && skip "LLRDMA_SKIP_SOFTROCE=1"
[ "${LLRDMA_SKIP_CLUSTER:-0}" = 1 ] && skip "LLRDMA_SKIP_CLUSTER=1"
[ "$(id -u)" = 0 ] || skip "needs root (QEMU exports / over 9p; run 'sudo make check-cluster')"
command -v qemu-system-x86_64 >/dev/null || command -v apt-get >/dev/null ||
  skip "no qemu-system-x86_64 and no apt-get to install it"

# One set of guests at a time (the one-node tier takes the same lock).
exec 9> "$top_builddir/.softroce-tier.lock"
flock 9

rc=0
"$top_srcdir/contrib/softroce-vm" --nodes 2 --rw "$top_builddir" \
  --timeout "${LLRDMA_CLUSTER_TIMEOUT:-1500}" \
  -- bash "$top_srcdir/tests/cluster/guest.sh" "$top_srcdir" || rc=$?
# The harness's own cluster contract: bad --nodes use exits 126 (no boot), a
# node that dies ends the run with 125 naming it, a node that stops answering
# is named as hung while the command's status stands (~1.5 min).
if [ $rc -eq 0 ]; then
  "$top_srcdir/contrib/softroce-vm-selftest" nodes-usage node-death node-hang || rc=$?
fi
case $rc in
  0) ;;
  124) echo "not ok - the two-node tier timed out" ;;
  125) echo "not ok - a guest died (console above)" ;;
  126) echo "not ok - softroce-vm could not start the guests" ;;
esac
exit $rc

#!/usr/bin/env bash
# Four-node tier: boots `contrib/softroce-vm --nodes 4` (four one-vCPU QEMU
# guests on one private Ethernet segment, rxe0 on each) and runs
# tests/cluster/test-alltoall4.sh on node0: an all-to-all of small and
# hint-sized messages among the four nodes over btl/llrdma, every byte
# checked.  The longer four-node Allreduce suite (test-allreduce4.sh) stays a
# run by hand (docs/softroce.md, "Four nodes").  Skips (exit 77, with the
# reason) as tier.sh does, and with LLRDMA_SKIP_CLUSTER4=1.
set -u
top_srcdir=$(cd "${srcdir:-.}" && pwd)
top_builddir=$(pwd)
skip() { echo "SKIP: four-node Soft-RoCE tier: $*"; exit 77; }

[ "${LLRDMA_SKIP_SOFTROCE:-0}" = 1 ] && skip "LLRDMA_SKIP_SOFTROCE=1"
[ "${LLRDMA_SKIP_CLUSTER:-0}" = 1 ] && skip "LLRDMA_SKIP_CLUSTER=1"
[ "${LLRDMA_SKIP_CLUSTER4:-0}" = 1 ] && skip "LLRDMA_SKIP_CLUSTER4=1"
[ "$(id -u)" = 0 ] || skip "needs root (QEMU exports / over 9p)"
command -v qemu-system-x86_64 >/dev/null || command -v apt-get >/dev/null ||
  skip "no qemu-system-x86_64 and no apt-get to install it"

# One set of guests at a time (the other tiers take the same lock).
exec 9> "$top_builddir/.softroce-tier.lock"
flock 9

rc=0
"$top_srcdir/contrib/softroce-vm" --nodes 4 --rw "$top_builddir" \
  --timeout "${LLRDMA_CLUSTER4_TIMEOUT:-1200}" \
  -- bash "$top_srcdir/tests/cluster/test-alltoall4.sh" || rc=$?
case $rc in
  0) ;;
  124) echo "not ok - the four-node tier timed out" ;;
  125) echo "not ok - a guest died (console above)" ;;
  126) echo "not ok - softroce-vm could not start the guests" ;;
esac
exit $rc

#!/usr/bin/env bash
# Runs on node0 of `contrib/softroce-vm --nodes 2` (see tier.sh), in the build
# tree: the cross-node tests, test-kill.sh last (it cuts node1's power).  TAP
# output; exit status = number of failed groups.
set -u
top_srcdir=$1
fails=0
export srcdir=$top_srcdir
for t in pingpong traffic check allreduce kill; do
  t0=$SECONDS rc=0
  echo "# --- tests/cluster/test-$t.sh"
  bash "$top_srcdir/tests/cluster/test-$t.sh" || rc=$?
  if [ $rc -eq 0 ]; then echo "ok - tests/cluster/test-$t.sh ($((SECONDS - t0)) s)"
  else echo "not ok - tests/cluster/test-$t.sh (exit $rc, $((SECONDS - t0)) s)"; fails=$((fails + 1)); fi
done
echo "# cluster tier: $fails group(s) failed"
exit $fails

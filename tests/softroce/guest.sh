#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (see tier.sh), in the build tree: real verbs
# traffic with perftest, the installed llrdma-check, and the MPI tests that
# need a device.  TAP output; exit status = number of failed groups.
set -u
top_srcdir=$1
fails=0
group() { # NAME COMMAND...
  local name=$1 t0=$SECONDS rc=0; shift
  echo "# --- $name"
  "$@" || rc=$?
  if [ $rc -eq 0 ]; then echo "ok - $name ($((SECONDS - t0)) s)"
  else echo "not ok - $name (exit $rc, $((SECONDS - t0)) s)"; fails=$((fails + 1)); fi
}

group "rxe0 is an active verbs port" \
  bash -c 'ibv_devinfo -d "${SOFTROCE_VM_IBDEV:-rxe0}" | grep -q PORT_ACTIVE'
group "perftest ib_send_lat over rxe0" "$top_srcdir/contrib/softroce-vm-selftest" --guest-pair ib_send_lat
group "perftest ib_write_bw over rxe0" "$top_srcdir/contrib/softroce-vm-selftest" --guest-pair ib_write_bw

installed_check() {
  local out
  out=$(OMPI_MCA_mca_base_component_path="$LLRDMA_STAGE_COMPDIR:SYS_DEFAULT" \
        LD_LIBRARY_PATH="$LLRDMA_STAGE_LIBDIR" LLRDMA_HELPDIR="$top_srcdir/common" \
        timeout 300 mpirun --oversubscribe --mca pml ob1 -np 2 \
        --mca btl_llrdma_size_hint 16K "$LLRDMA_STAGE_BINDIR/llrdma-check" 2>&1)
  echo "$out" | sed 's/^/# /'
  grep -q "all 2 ranks agree: size hint 16K" <<<"$out" && grep -q " rxe0 " <<<"$out"
}
group "installed llrdma-check sees rxe0 on 2 ranks" installed_check

export LLRDMA_EXPECT_DEVICE=1 LLRDMA_TEST_TIMEOUT=300
for t in test-disqualify test-check-tool test-mismatch; do
  group "tests/mpi/$t.sh with rxe0 visible" bash "$top_srcdir/tests/mpi/$t.sh"
done
for t in "$top_srcdir"/tests/softroce/test-*.sh; do
  [ -e "$t" ] || continue
  group "tests/softroce/$(basename "$t")" bash "$t"
done
echo "# Soft-RoCE tier: $fails group(s) failed"
exit $fails

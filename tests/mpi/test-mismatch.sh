#!/usr/bin/env bash
# Ranks that disagree on the hint are detected through the modex (MPMD launch
# where two ranks get another value): abort by default, warn on request, and
# llrdma-check exits 1 with a table.
. ./tests/mpi/env.sh

mpmd() { # extra mpirun options, then program
  mpi "$@" -np 2 -x OMPI_MCA_btl_llrdma_size_hint=16K "${prog[@]}" \
    : -np 2 -x OMPI_MCA_btl_llrdma_size_hint=64K "${prog[@]}"
}

prog=("$TRING")
rc=0; out=$(mpmd 2>&1) || rc=$?
check "mismatch aborts the job (exit $rc)" test $rc -ne 0 -a $rc -ne 124 -a $rc -ne 137
check "report names the deviant ranks and values" \
  bash -c 'grep -q "rank 2 on .*64K" <<<"$0" && grep -q "rank 3 on .*64K" <<<"$0"' "$out"
check "report names the majority" grep -q "majority 16K" <<<"$out"

rc=0; out=$(mpmd --mca coll_llrdma_mismatch_action warn 2>&1) || rc=$?
check "warn: job completes" test $rc -eq 0
check "warn: report printed" grep -q "differs across ranks" <<<"$out"
check "warn: application ran" grep -q "t_ring: PASS" <<<"$out"

prog=("$CHECK")
rc=0; out=$(mpmd 2>&1) || rc=$?
check "llrdma-check exits 1 on mismatch" test $rc -eq 1
check "llrdma-check shows the deviant" grep -q "rank 2 on" <<<"$out"

rc=0; out=$(mpi -np 4 --mca btl_llrdma_size_hint 8K "$TRING" 2>&1) || rc=$?
check "agreeing ranks run normally" test $rc -eq 0
finish

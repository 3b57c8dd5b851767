#!/usr/bin/env bash
# Ranks that disagree on the hint are detected through the modex (MPMD launch
# where two ranks get another value): abort by default, warn on request, and
# llrdma-check exits 1 with a table.
. ./tests/mpi/env.sh

mpmd() { # extra mpirun options, then program
  launch "$@" -np 2 -x OMPI_MCA_btl_llrdma_size_hint=16K "${prog[@]}" \
    : -np 2 -x OMPI_MCA_btl_llrdma_size_hint=64K "${prog[@]}"
}

prog=("$TRING")
mpmd
check "mismatch aborts the job (exit $rc)" test $rc -ne 0 -a $rc -ne 124 -a $rc -ne 137
check "mismatch: the application never ran" lacks "t_ring rank [0-9]*: PASS"
deviants() { has "rank 2 on .*64K" && has "rank 3 on .*64K"; }
check "report names the deviant ranks and values" deviants
check "report names the majority" has "majority 16K"

mpmd --mca coll_llrdma_mismatch_action warn
check_pass "warn: job completes, application ran on every rank" t_ring 4
check_run "warn: report printed" has "differs across ranks"

prog=("$CHECK")
mpmd
check "llrdma-check exits 1 on mismatch (exit $rc)" test $rc -eq 1
check "llrdma-check shows the deviant" has "rank 2 on"

launch -np 4 --mca btl_llrdma_size_hint 8K "$TRING"
check_pass "agreeing ranks run normally" t_ring 4
finish

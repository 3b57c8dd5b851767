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

# A rank without coll/llrdma (here excluded by --mca coll; in CI once a
# component directory that could not be read): one Allreduce would run in two
# components.  Abort by default, naming the rank; with warn, coll/llrdma is off
# for every rank and the job runs on the module below.
launch -np 1 "$TRING" : -np 1 -x OMPI_MCA_coll=^llrdma "$TRING" : -np 2 "$TRING"
check "rank without coll/llrdma: the job ends (exit $rc)" \
  test $rc -ne 0 -a $rc -ne 124 -a $rc -ne 137
check "rank without coll/llrdma: the application never ran" lacks "t_ring rank [0-9]*: PASS"
check "rank without coll/llrdma: named" has "coll/llrdma is not loaded on rank(s) 1 (1 of 4 ranks)"
launch -np 1 --mca coll_llrdma_mismatch_action warn --mca coll_llrdma_verbose 10 "$TRING" \
  : -np 2 "$TRING" : -np 1 -x OMPI_MCA_coll_llrdma_priority=0 "$TRING"
check_pass "coll_llrdma_priority 0 on one rank, warn: every rank passes" t_ring 4
check_run "priority 0 on one rank, warn: rank 3 named, off for the job" \
  has "not loaded on rank(s) 3 (1 of 4 ranks); coll/llrdma is off on every communicator"
check_run "priority 0 on one rank, warn: no call took coll/llrdma" lacks ", segment [0-9]"
finish

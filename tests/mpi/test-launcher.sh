#!/usr/bin/env bash
# contrib/llrdma-run: preflight, uniform hint, auto:grad form, bad input.
. ./tests/mpi/env.sh
export LLRDMA_BINDIR="$top_builddir" LLRDMA_COMPONENT_DIR="$top_builddir/.libs"
export LLRDMA_MPIRUN="$MPIRUN"
RUN="$top_builddir/llrdma-run"

capture timeout 240 "$RUN" --hint 16K -np 2 --oversubscribe -- "$TAPI" expect 16384 env
check_pass "llrdma-run --hint 16K: preflight and application" t_api 2
capture timeout 240 "$RUN" --hint auto:grad=8M -np 4 --oversubscribe -- "$TAPI" expect 2516583 env
check_pass "--hint auto:grad=8M with -np 4 = 8M/4*1.2" t_api 4
capture "$RUN" --dry-run --hint auto:grad=1M,ranks=8,headroom=0 -np 2 -- ./app
check_run "auto:grad with ranks= and headroom=" has "btl_llrdma_size_hint 131072"
check_run "dry run shows the component path" has "mca_base_component_path $top_builddir/.libs:SYS_DEFAULT"
# pml/ob1 unless the user chose a PML (the test environment's OMPI_MCA_pml
# is one such choice, so it is unset here).
capture env -u OMPI_MCA_pml "$RUN" --dry-run --hint 8K -np 2 -- ./app
check_run "no PML chosen: preflight and application with --mca pml ob1" count "--mca pml ob1" 2
capture env -u OMPI_MCA_pml "$RUN" --dry-run --hint 8K -np 2 --mca pml ucx -- ./app
pml_kept() { lacks "pml ob1" && count "--mca pml ucx" 2; }
check_run "--mca pml ucx chosen: kept, ob1 not added" pml_kept
capture env OMPI_MCA_pml=cm "$RUN" --dry-run --hint 8K -np 2 -- ./app
check_run "OMPI_MCA_pml chosen: ob1 not added" lacks "pml ob1"
rc=0; "$RUN" --hint abc -np 2 -- ./app >/dev/null 2>&1 || rc=$?
check "invalid --hint: usage error 64 (exit $rc)" test $rc -eq 64
rc=0; "$RUN" -np 2 ./app >/dev/null 2>&1 || rc=$?
check "missing -- : usage error 64 (exit $rc)" test $rc -eq 64
capture timeout 240 "$RUN" --no-preflight -np 1 -- "$TAPI" expect 0 default
check_pass "without --hint nothing is imposed (default 0)" t_api 1
finish

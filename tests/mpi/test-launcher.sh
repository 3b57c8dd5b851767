#!/usr/bin/env bash
# contrib/llrdma-run: preflight, uniform hint, auto:grad form, bad input.
. ./tests/mpi/env.sh
export LLRDMA_BINDIR="$top_builddir" LLRDMA_COMPONENT_DIR="$top_builddir/.libs"
export LLRDMA_MPIRUN="$MPIRUN"
RUN="$top_builddir/llrdma-run"

out=$(timeout 240 "$RUN" --hint 16K -np 2 --oversubscribe -- "$TAPI" expect 16384 env 2>&1)
check "llrdma-run --hint 16K: preflight and application" grep -q "t_api: PASS" <<<"$out"
out=$(timeout 240 "$RUN" --hint auto:grad=8M -np 4 --oversubscribe -- "$TAPI" expect 2516583 env 2>&1)
check "--hint auto:grad=8M with -np 4 = 8M/4*1.2" grep -q "t_api: PASS" <<<"$out"
out=$("$RUN" --dry-run --hint auto:grad=1M,ranks=8,headroom=0 -np 2 -- ./app 2>&1)
check "auto:grad with ranks= and headroom=" grep -q "btl_llrdma_size_hint 131072" <<<"$out"
check "dry run shows the component path" grep -q "mca_base_component_path $top_builddir/.libs:SYS_DEFAULT" <<<"$out"
rc=0; "$RUN" --hint abc -np 2 -- ./app >/dev/null 2>&1 || rc=$?
check "invalid --hint: usage error 64" test $rc -eq 64
rc=0; "$RUN" -np 2 ./app >/dev/null 2>&1 || rc=$?
check "missing -- : usage error 64" test $rc -eq 64
out=$(timeout 240 "$RUN" --no-preflight -np 1 -- "$TAPI" expect 0 default 2>&1)
check "without --hint nothing is imposed (default 0)" grep -q "t_api: PASS" <<<"$out"
finish

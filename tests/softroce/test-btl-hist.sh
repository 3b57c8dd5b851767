#!/usr/bin/env bash
# btl/llrdma's message-size histogram end to end (Soft-RoCE VM only): a known
# size mix at hint 4K (tests/softroce/t_hist.c) whose MPI_T counters each rank
# checks exactly; then the finalize records of the dump, read here with awk
# (not through llrdma's reader), and what llrdma-hint recommend and
# llrdma-check --stats make of them.
. ./tests/mpi/env.sh
T="$top_builddir/tests/softroce/t_hist"
d=$(mktemp -d "${TMPDIR:-/tmp}/llrdma-hist.XXXXXX")
trap 'rm -rf "$d"' EXIT

launch --mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1 \
  --mca btl_llrdma_size_hint 4K --mca btl_llrdma_dump "$d/llrdma-%r.json" -np 2 "$T"
check_pass "known size mix over rxe0: MPI_T counters exact on both ranks" t_hist 2
has "stalled receiver" && grep "stalled receiver" <<<"$out" | sed 's/^/# /'

# bucket FILE PATH B: count of bucket B (0-based) on PATH in the finalize record.
bucket() {
  grep '"record":"finalize"' "$1" | sed -n "s/.*\"$2\":{\"count\":\[\([0-9,]*\)\].*/\1/p" |
    awk -F, -v b="$3" '{ print $(b + 1) }'
}
check "each rank dumped an MPI_Init and a finalize record" \
  bash -c '[ "$(grep -c "\"record\":\"finalize\"" "$1")" = 1 ] && [ "$(wc -l <"$1")" = 2 ] &&
           [ "$(grep -c "\"record\":\"finalize\"" "$2")" = 1 ] && [ "$(wc -l <"$2")" = 2 ]' \
  _ "$d/llrdma-0.json" "$d/llrdma-1.json"
got="$(bucket "$d/llrdma-0.json" ll 8) $(bucket "$d/llrdma-0.json" ll 12) $(bucket "$d/llrdma-0.json" bw 13) $(bucket "$d/llrdma-0.json" bw 16)"
echo "# rank 0 finalize record: ll[8] ll[12] bw[13] bw[16] = $got"
check "rank 0's dump: exactly the mix and the stalled burst (1000 300 60 40)" [ "$got" = "1000 300 60 40" ]
got="$(bucket "$d/llrdma-1.json" ll 8) $(bucket "$d/llrdma-1.json" ll 12) $(bucket "$d/llrdma-1.json" bw 13) $(bucket "$d/llrdma-1.json" bw 16)"
check "rank 1's dump: none of the mix (it only received)" [ "$got" = "0 0 0 0" ]

capture "$top_builddir/llrdma-hint" recommend "$d"
echo "$out" | sed 's/^/# /'
check_run "llrdma-hint recommend on the dumps: 4K" has "^recommended hint: 4K (4096 bytes)"
check_run "llrdma-hint recommend: the stalled burst filled the low-latency queue" \
  has "WARNING: the low-latency queue was full for"
capture "$top_builddir/llrdma-hint" recommend --json "$d"
check_run "llrdma-hint recommend --json" has '^{"recommendation":"hint","hint":4096,'
capture "$top_builddir/llrdma-check" --stats "$d"
check_run "llrdma-check --stats shows rank 0's buckets" has "^  (2K, 4K\] *300 *0 *0$"
finish

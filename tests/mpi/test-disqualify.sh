#!/usr/bin/env bash
# Without a verbs device btl/llrdma disqualifies itself cleanly and the job
# runs over the other BTLs.  LLRDMA_EXPECT_DEVICE=1 (set by the Soft-RoCE
# tier) expects it to find rxe0 and go active instead (vader still carries
# on-node traffic here; tests/softroce/ forces traffic over llrdma).
. ./tests/mpi/env.sh

for n in 1 2 4; do
  rc=0
  out=$(mpi -np $n --mca btl self,vader,llrdma --mca btl_llrdma_dump stderr \
        --mca btl_llrdma_size_hint 8K "$TRING" 2>&1) || rc=$?
  check "$n ranks: job runs over the other BTLs" \
    bash -c "[ $rc -eq 0 ] && grep -q 't_ring: PASS' <<<\"\$0\"" "$out"
  if [ "${LLRDMA_EXPECT_DEVICE:-0}" = 1 ]; then
    check "$n ranks: device found, BTL active" \
      test "$(grep -c '"btl_status":"active","devices":1,"device":{"name":"rxe0","port":1' <<<"$out")" -eq $n
  else
    check "$n ranks: disqualified, no verbs device" \
      test "$(grep -c '"btl_status":"disqualified: no verbs device"' <<<"$out")" -eq $n
  fi
done
out=$(mpi -np 1 --mca btl self,vader,llrdma --mca btl_llrdma_verbose 10 "$TRING" 2>&1)
if [ "${LLRDMA_EXPECT_DEVICE:-0}" = 1 ]; then
  check "verbose output says active" grep -q "btl:llrdma: size hint 0 from default; active" <<<"$out"
else
  check "verbose output says why" \
    grep -q "btl:llrdma: size hint 0 from default; disqualified" <<<"$out"
fi
finish

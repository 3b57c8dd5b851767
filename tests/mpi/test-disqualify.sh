#!/usr/bin/env bash
# Without a verbs device btl/llrdma disqualifies itself cleanly and the job
# runs over the other BTLs.  LLRDMA_EXPECT_DEVICE=1 (set by the Soft-RoCE
# tier) expects it to find rxe0 and go active instead (vader still carries
# on-node traffic here; tests/softroce/ forces traffic over llrdma).
. ./tests/mpi/env.sh

for n in 1 2 4; do
  launch -np $n --mca btl self,vader,llrdma --mca btl_llrdma_dump stderr \
    --mca btl_llrdma_size_hint 8K "$TRING"
  check_pass "$n ranks: job runs over the other BTLs" t_ring $n
  if [ "${LLRDMA_EXPECT_DEVICE:-0}" = 1 ]; then
    check_run "$n ranks: device found, BTL active" \
      count '"btl_status":"active","devices":1,"device":{"name":"rxe0","port":1' $n
  else
    check_run "$n ranks: disqualified, no verbs device" \
      count '"btl_status":"disqualified: no verbs device"' $n
  fi
done
launch -np 1 --mca btl self,vader,llrdma --mca btl_llrdma_verbose 10 "$TRING"
if [ "${LLRDMA_EXPECT_DEVICE:-0}" = 1 ]; then
  check_run "verbose output says active" has "btl:llrdma: size hint 0 from default; active"
else
  check_run "verbose output says why" has "btl:llrdma: size hint 0 from default; disqualified"
fi
check_pass "verbose run: PASS" t_ring 1
finish

#!/usr/bin/env bash
# btl/llrdma carries all traffic (--mca btl self,llrdma): ping-pong from 1 B to
# 4 MB at hints 0, 8K and 64K, including the sizes around each hint and the
# fragment limits, every byte verified; 2 and 4 ranks.  Soft-RoCE VM only.
# A rank that finds a wrong byte aborts the job: each check of a run requires
# exit status 0, no FAIL line and every rank's PASS line (env.sh: check_pass).
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_llrdma"
# rxe does its protocol work in the kernel on the guest's two vCPUs: ranks bound
# to a vCPU and busy-polling delay it by scheduler ticks (8 ms round trips), so
# the ranks float and yield when idle.
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)

for hint in 0 8192 65536; do
  around=""
  [ $hint -gt 0 ] && around="$((hint - 1)) $hint $((hint + 1)) $((2 * hint)) $((2 * hint + 1))"
  launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint $hint --mca btl_llrdma_verbose 20 \
    --mca btl_llrdma_dump stderr \
    "$T" pingpong 10 1 8 64 256 1024 4096 12287 12288 12289 65535 65536 65537 $around
  grep "t_llrdma: " <<<"$out" | sed 's/^/# /'
  check_pass "hint $hint: small and boundary sizes, 2 ranks" t_llrdma 2
  check_run "hint $hint: both ranks active on rxe0" \
    count '"btl_status":"active","devices":1,"device":{"name":"rxe0"' 2
  if [ $hint -gt 0 ]; then
    both_paths() { has 'll connection to' && has 'bw connection to'; }
    check_run "hint $hint: LL and BW connections set up together" both_paths
    check_run "hint $hint: requested vs granted in the dump" \
      has '"max_inline_granted_ll":[0-9]*,.*"sq_depth_granted_ll":[0-9]'
  fi
  launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint $hint "$T" pingpong 2 262144 1048576 4194304
  grep "t_llrdma: " <<<"$out" | sed 's/^/# /'
  check_pass "hint $hint: 256 KB..4 MB" t_llrdma 2
done

launch -np 4 "${B[@]}" --mca btl_llrdma_size_hint 8K "$T" pingpong 5 1 8193 65537 1048576
check_pass "4 ranks, hint 8K: two pairs at once" t_llrdma 4

# rxe has no CQ moderation, which only the progress thread would use: without
# the thread nothing is said about it (with it, tests/softroce/test-messages.sh).
check_run "no moderation warning without the progress thread" \
  lacks "CQ moderation .* not supported by the device"
finish

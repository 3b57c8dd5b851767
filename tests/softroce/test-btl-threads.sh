#!/usr/bin/env bash
# btl/llrdma under MPI_THREAD_MULTIPLE (--mca btl self,llrdma): 4 threads per
# rank, a tag per thread, ping-pong (pairs) and all-to-all on 4 ranks at
# hints 0, 8K and 64K, each size around the hint and above the eager limit
# (RGET), every byte verified; the same with btl_llrdma_progress_thread=1,
# whose dump says the BW path is event-driven and whose finalize record
# counts completion events; sendi's posts by ibv_wr_send (and, with
# btl_llrdma_wr_api 0, by ibv_post_send), as each dump says; llrdma-check
# --threads shows every rank active.
# Soft-RoCE VM only.  Connection set-up happens from 4 threads at once (no
# warm-up).  Each check requires exit status 0, no FAIL line and every
# rank's PASS line (env.sh: check_pass).
. ./tests/mpi/env.sh
T="$top_builddir/tests/softroce/t_threads"
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)
dumps=$(mktemp -d)
trap 'rm -rf "$dumps"' EXIT

for pt in 0 1; do
  for hint in 0 8192 65536; do
    around="1 8 4096"
    [ $hint -gt 0 ] && around="1 8 $((hint - 1)) $hint $((hint + 1)) $((2 * hint + 1))"
    rm -f "$dumps"/*.json
    launch -np 4 "${B[@]}" --mca btl_llrdma_size_hint $hint --mca btl_llrdma_progress_thread $pt \
      --mca btl_llrdma_dump "$dumps/d-%r.json" "$T" pingpong 3 $around 70000 1048577
    check_pass "progress thread $pt, hint $hint: 4 threads x 2 pairs ping-pong" t_threads 4
    cfg=$(cat "$dumps"/*.json 2>/dev/null)
    out=$cfg check_run "progress thread $pt, hint $hint: every rank active under MPI_THREAD_MULTIPLE" \
      count '"btl_status":"active"' 4
    if [ $pt = 1 ]; then
      out=$cfg check_run "hint $hint: the dump says bw event, ll poll" \
        count '"progress_bw":"event"' 4
      out=$cfg check_run "hint $hint: rxe has no moderation: one event per completion, said" \
        count 'one event per completion (the device has no CQ moderation)' 4
      out=$cfg check_run "hint $hint: completion events counted at finalize" \
        has '"bw":{[^}]*"cq_events":[1-9]'
    else
      out=$cfg check_run "hint $hint: no thread: bw polled" count '"progress_bw":"poll"' 4
      # rxe has rdma-core's work-request API: sendi posts by ibv_wr_send.
      want='"post_api":"ll: ibv_wr_send, bw: ibv_wr_send"'
      [ $hint = 0 ] && want='"post_api":"bw: ibv_wr_send"'
      out=$cfg check_run "hint $hint: small sends posted by ibv_wr_send, said" count "$want" 4
    fi
    launch -np 4 "${B[@]}" --mca btl_llrdma_size_hint $hint --mca btl_llrdma_progress_thread $pt \
      "$T" alltoall 2 8 $((hint + 1)) 100000
    check_pass "progress thread $pt, hint $hint: 4 threads x all-to-all on 4 ranks" t_threads 4
  done
done

# The same ping-pong with sendi's posts by ibv_post_send (the knob off).
rm -f "$dumps"/*.json
launch -np 4 "${B[@]}" --mca btl_llrdma_size_hint 8192 --mca btl_llrdma_wr_api 0 \
  --mca btl_llrdma_dump "$dumps/d-%r.json" "$T" pingpong 3 1 8 8191 8192 70000
check_pass "btl_llrdma_wr_api 0, hint 8192: 4 threads x 2 pairs ping-pong" t_threads 4
out=$(cat "$dumps"/*.json 2>/dev/null) check_run "btl_llrdma_wr_api 0: ibv_post_send, said" \
  count '"post_api":"ll: ibv_post_send (btl_llrdma_wr_api=0), bw: ibv_post_send (btl_llrdma_wr_api=0)"' 4

launch -np 4 "${B[@]}" --mca btl_llrdma_size_hint 8K "$top_builddir/llrdma-check" --threads
threads_active() { has 'thread level: MPI_THREAD_MULTIPLE' && [ "$(grep -c ' active$' <<<"$out")" = 4 ]; }
check_run "llrdma-check --threads: MPI_THREAD_MULTIPLE, all 4 ranks active" threads_active
finish

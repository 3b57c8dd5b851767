#!/usr/bin/env bash
# Peers with different size hints over btl/llrdma (MPMD launch, one hint per
# app context, coll_llrdma_mismatch_action=warn): 16K against 4K, 8K against
# 0 and 64K against 0, in both rank orders.  At 64K against 0 the 64K rank's
# BW fragments (128K) exceed the other's buffers (64K): they go in pieces,
# joined by the receiver, and the finalize lines (verbose 5) must count them.  Verified ping-pong (each side checks what it
# receives) and bursts both ways at once, over every power of two from 1 B to
# 4x the larger hint and +-1 around each hint and twice each hint
# (tests/softroce/t_flow pair).  Soft-RoCE VM only.
#
# Open MPI 4.1's mpirun applies --mca to every app context (the first value
# wins; checked with 4.1.4), so the hint goes per context with -x.
. ./tests/mpi/env.sh
T="$top_builddir/tests/softroce/t_flow"
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1
   --mca coll_llrdma_mismatch_action warn)

sizes_for() { # HINT_A HINT_B: the size list
  local a=$1 b=$2 hi s h
  hi=$((a > b ? a : b))
  { for ((s = 1; s <= 4 * hi; s *= 2)); do echo $s; done
    for h in $a $b; do
      [ $h -gt 0 ] || continue
      for s in $h $((2 * h)); do echo $((s - 1)); echo $s; echo $((s + 1)); done
    done; } | sort -n -u | tr '\n' ' '
}

mix() { # HINT_RANK0 HINT_RANK1 [extra mpirun args]
  local a=$1 b=$2 rc=0 sizes t0=$SECONDS
  shift 2
  sizes=$(sizes_for $a $b)
  out=$(mpi "${B[@]}" "$@" -np 1 -x OMPI_MCA_btl_llrdma_size_hint=$a "$T" pair 3 8 $sizes \
        : -np 1 -x OMPI_MCA_btl_llrdma_size_hint=$b "$T" pair 3 8 $sizes 2>&1) || rc=$?
  echo "$out" | grep "t_flow: \|FAIL\|llrdma: transport\|differs" | sed 's/^/# /'
  check "rank 0 hint $a, rank 1 hint $b: each rank has its own hint" \
    grep -q "t_flow: rank 0 size hint $a, rank 1 size hint $b" <<<"$out"
  check "rank 0 hint $a, rank 1 hint $b: $(wc -w <<<"$sizes") sizes verified (exit $rc, $((SECONDS - t0)) s)" \
    bash -c '[ $1 -eq 0 ] && ! grep -qw FAIL <<<"$0" &&
             [ "$(grep -c "^t_flow rank [01]: PASS" <<<"$0")" -eq 2 ]' "$out" $rc
}

mix 16384 4096
mix 4096 16384
mix 8192 0
mix 0 8192
# Pieces: the finalize lines of both ranks, "N fragment(s) sent in pieces, M
# joined from pieces"; the 64K rank sends, the 0 rank joins.
pieces() {
  grep "fragment(s) sent in pieces" <<<"$out" |
    sed -n 's/.*: \([0-9]*\) fragment(s) sent in pieces, \([0-9]*\) joined.*/\1 \2/p'
}
for order in "65536 0" "0 65536"; do
  mix $order --mca btl_llrdma_verbose 5
  counts=$(pieces)
  echo "# sent/joined in pieces per rank: $(tr '\n' ';' <<<"$counts")"
  check "hints $order: the 64K rank sent fragments in pieces and the other joined them" \
    bash -c 'sent=0; joined=0; while read -r s j; do [ -n "$s" ] || continue
               [ "$s" -gt 0 ] && sent=1; [ "$j" -gt 0 ] && joined=1; done <<<"$0"
             [ $sent -eq 1 ] && [ $joined -eq 1 ]' "$counts"
done
finish

#!/usr/bin/env bash
# Verified ping-pong between two nodes over btl/llrdma (ranks mapped by node,
# so each pair 0-1, 2-3 spans the link): at hints 0, 8K and 64K, 1 B up to
# 4 MB (two pairs at once at 8K), the sizes around each hint and the fragment
# limits; then 16 MB and 64 MB.
# Every byte is checked by the receiving rank (t_llrdma aborts on a wrong one).
. "$(dirname "$0")/env.sh"
V=(--mca btl_llrdma_verbose 20)
for hint in 0 8192 65536; do
  # hint 8K: two pairs at once
  np=2 top=4194304
  [ $hint -eq 8192 ] && np=4 top=
  around=""
  [ $hint -gt 0 ] && around="$((hint - 1)) $hint $((hint + 1)) $((2 * hint + 1))"
  launch -np $np --map-by node "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint $hint \
    "$T" pingpong 1 1 8 256 4096 12287 12289 65535 65537 $around 1048576 $top
  grep "t_llrdma: " <<<"$out" | sed 's/^/# /'
  check_pass "hint $hint: $np ranks, 1 B..${top:-1048576} B, node0 <-> node1" t_llrdma $np
  check_run "hint $hint: btl/llrdma connections on both nodes" across node0 node1
done
# The large sizes, one pair (3 round trips each: ~1 min at 10 MB/s).
# LLRDMA_CLUSTER_BIG_HINTS="0 8192 65536" runs them at every hint.
for hint in ${LLRDMA_CLUSTER_BIG_HINTS:-8192}; do
  launch -np 2 --map-by node "${C[@]}" "${V[@]}" --mca btl_llrdma_size_hint $hint \
    "$T" pingpong 1 16777216 67108864
  grep "t_llrdma: " <<<"$out" | sed 's/^/# /'
  check_pass "hint $hint: 16 MB and 64 MB, node0 <-> node1" t_llrdma 2
  check_run "hint $hint, 64 MB: btl/llrdma connections on both nodes" across node0 node1
done
finish

#!/usr/bin/env bash
# The BTL's own user-space instructions per small send, without a device:
# tests/unit/sendi_cost (built by `make check`: two btl/llrdma modules wired
# through the fake device, ITERS inline sendi calls of a 16-byte header and
# an 8-byte payload, every message checked) runs under callgrind, collecting
# only inside llrdma_sendi, then again collecting only inside the receiver's
# progress (recv_progress).  Printed per hint: llrdma_sendi's inclusive
# instructions per call, the fake device's post (its ibv_wr_start, wr_send,
# wr_set_inline_data and wr_complete, or f_post_send without the
# work-request API; a real provider replaces them)
# and the difference, the BTL's own share;
# and per received message, the receiver's progress less the fake device's
# poll (which also moves the data), its receive repost and the test's
# receive callback (ob1's, in a real job): the BTL's own receive handling.
# Instruction counts do not depend on the machine's load.  The real total,
# with rxe's post, comes from contrib/bench/send-cost.sh in a guest.
#   contrib/bench/sendi-fake-cost.sh [BUILD_DIR] [ITERS] [HINTS...]
set -u
build=$(readlink -f "${1:-_build}")
iters=${2:-2000}
shift 2 2>/dev/null || shift $#
hints=("$@")
[ ${#hints[@]} -gt 0 ] || hints=(0 8192 65536)
bin=$build/tests/unit/.libs/sendi_cost
[ -x "$bin" ] || bin=$build/tests/unit/sendi_cost
[ -x "$bin" ] || { echo "sendi-fake-cost: $build/tests/unit/sendi_cost missing (make check builds it)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "sendi-fake-cost: valgrind missing (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| hint | llrdma_sendi Ir/call | fake post Ir/call | BTL's own Ir/send | receiver's progress Ir/msg | fake poll + repost, callback Ir/msg | BTL's own Ir/received msg |"
echo "|---|---|---|---|---|---|---|"
for h in "${hints[@]}"; do
  out=$(LD_LIBRARY_PATH=$build/.libs valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$h" \
        --toggle-collect=llrdma_sendi "$bin" "$iters" "$h" 2>&1) || { echo "$out" >&2; exit 1; }
  calls=$(sed -n 's/.*messages, \([0-9]*\) sendi calls.*/\1/p' <<<"$out")
  grep -q "sendi_cost: hint $h: $iters messages, .* $iters arrived, 0 bad" <<<"$out" ||
    { echo "sendi-fake-cost: not every message arrived: $out" >&2; exit 1; }
  ann=$(callgrind_annotate --inclusive=yes "$tmp/cg.$h" 2>/dev/null)
  total=$(awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}' <<<"$ann")
  # The fake device's post: its fx_* work-request functions (the default)
  # or f_post_send (btl_llrdma_wr_api=0, or as the fallback).
  post=$(awk '/fake_verbs.c:(f_post_send|fx_start|fx_send|fx_set_inline_data|fx_complete) \[/ {
                gsub(",","",$1); s += $1} END {print s + 0}' <<<"$ann")
  LD_LIBRARY_PATH=$build/.libs valgrind --tool=callgrind --callgrind-out-file="$tmp/cgr.$h" \
    --toggle-collect=recv_progress "$bin" "$iters" "$h" > "$tmp/r.$h" 2>&1 || { cat "$tmp/r.$h" >&2; exit 1; }
  nrecv=$(sed -n 's/.* \([0-9]*\) received in recv_progress.*/\1/p' "$tmp/r.$h")
  rann=$(callgrind_annotate --inclusive=yes "$tmp/cgr.$h" 2>/dev/null)
  rtotal=$(awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}' <<<"$rann")
  fake=$(awk '/fake_verbs.c:f_poll_cq \[|fake_verbs.c:f_post_srq_recv \[|fake_btl.c:on_recv \[/ {
                gsub(",","",$1); s += $1} END {print s + 0}' <<<"$rann")
  awk -v h="$h" -v t="$total" -v p="${post:-0}" -v c="$calls" -v rt="$rtotal" -v f="$fake" -v n="$nrecv" \
    'BEGIN { printf "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", h, t / c, p / c, (t - p) / c,
             rt / n, f / n, (rt - f) / n }'
done

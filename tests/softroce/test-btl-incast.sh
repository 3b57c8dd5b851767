#!/usr/bin/env bash
# Incast over btl/llrdma: 3 senders each MPI_Isend 400 messages to rank 0
# while rank 0 computes for 1 s without calling MPI, then rank 0 drains them
# (llrdma-bench incast: rank 0 checks every byte and exits 1 by itself on a
# corrupt or missing message).  Hints 0, 8K and 64K, each at 8 B, 4 KB and
# 64 KB.  Then 8 B and 4 KB at hint 8K with the receive windows overcommitted
# (btl_llrdma_recv_mem_max 1 MiB: the three peers' windows of 64 share 64
# buffers, sends beyond wait in RNR, the SRQ limit event must grow the pool:
# verbose output checked), and in the guaranteed mode (btl_llrdma_rnr_retry 6, recv_mem_max 1: 4 credits per
# peer).  About 20-30 s per job in the TCG guest.  Fails when rank 0 needs
# more than LLRDMA_INCAST_MAX_DRAIN_MS (5000; x4 for 64 KB messages, 79 MB in
# all) from its wake to its last message: a receiver that wakes up must not
# wait for senders in RNR back-off.  With 8 B messages and coalescing (btl_llrdma_coalesce, on by
# default) the senders must also be done before rank 0 wakes, their messages
# packed and complete while it computes.  Then 8 B at hints 8K and 64K with
# btl_llrdma_coalesce=0: one receive buffer per message, drain limit only.
# At hint 8K with 4 KB messages the senders must have batched their busy send
# queues (btl_llrdma_sq_batch: the count at finalize, verbose 5).
# Soft-RoCE VM only.
. ./tests/mpi/env.sh
BENCH="$top_builddir/llrdma-bench"
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)
max_ms=${LLRDMA_INCAST_MAX_DRAIN_MS:-5000}
err="$LLRDMA_TEST_HOME/incast.err"

# field NAME JSON: the number after "NAME": on the result line.
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$2" | head -n 1; }

incast() { # LABEL MESSAGES SIZE, then mpirun options
  local label=$1 msgs=$2 size=$3 rc=0 out res drain t0=$SECONDS; shift 3
  out=$(mpi -np 4 "${B[@]}" "$@" "$BENCH" incast --messages "$msgs" --size "$size" \
        --busy-ms 1000 --iters 1 --timeout 120 --json 2>"$err") || rc=$?
  grep -v '^#' "$err" | grep -v 'btl:llrdma: .*SRQ ran low' | tail -n 15 | sed 's/^/# /'
  grep -m 2 'SRQ ran low' "$err" | sed 's/^/# /'
  grep '^# transport\|^# rank0' "$err" | sed 's/^/# /'
  res=$(grep '^{"size":' <<<"$out")
  drain=$(field drain_ms_max "$res")
  echo "# $label: $msgs x $size B from 3 senders: drain ${drain:--} ms, slowest sender" \
       "$(field sender_ms_max "$res") ms, latency P50 $(field lat_us_p50 "$res") us" \
       "P99 $(field lat_us_p99 "$res") us ($((SECONDS - t0)) s)"
  check "$label: $msgs x $size B: exit 0, every byte verified by rank 0 (exit $rc)" \
    bash -c '[ $1 -eq 0 ] && grep -q "\"verified\":true}" <<<"$0"' "$out" $rc
  check "$label: over btl/llrdma" grep -q '^# transport rank1 -> rank0: pml=ob1 btl eager=llrdma' "$err"
  # 3 x 400 x 64 KB is 79 MB through rxe in the emulated guest (about 3 s
  # quiet): the limit grows with it; RNR back-off would cost minutes.
  local lim=$max_ms; [ "$size" -ge 65536 ] && lim=$((max_ms * 4))
  check "$label: $msgs x $size B: drain ${drain:-?} ms <= $lim ms" \
    awk -v d="${drain:-x}" -v m="$lim" 'BEGIN { exit !(d ~ /^[0-9.]+$/ && d + 0 <= m + 0) }'
  if [ "$size" = 8 ] && [[ " $* " != *" btl_llrdma_coalesce 0 "* ]] &&
     [[ " $* " != *" btl_llrdma_recv_mem_max "* ]]; then
    local sent; sent=$(field sender_ms_max "$res")
    check "$label: $msgs x 8 B: senders done while rank 0 computes (${sent:-?} ms < 1000 ms)" \
      awk -v d="${sent:-x}" 'BEGIN { exit !(d ~ /^[0-9.]+$/ && d + 0 < 1000) }'
  fi
}

for hint in 0 8192 65536; do
  for size in 8 4096 65536; do
    if [ $hint = 8192 ] && [ $size = 4096 ]; then
      # 400 sends without progress outrun the LL queue (64 WRs): past half of
      # it they wait and go in batches (btl_llrdma_sq_batch), counted at
      # finalize.
      incast "hint $hint" 400 $size --mca btl_llrdma_size_hint $hint --mca btl_llrdma_verbose 5
      check "hint $hint, $size B: senders batched a busy send queue" \
        grep -Eq ' [1-9][0-9]* waited for a busy send queue \(batched\)' "$err"
    else
      incast "hint $hint" 400 $size --mca btl_llrdma_size_hint $hint
    fi
  done
done
for size in 8 4096; do
  incast "hint 8192, windows overcommitted" 400 $size --mca btl_llrdma_size_hint 8192 \
    --mca btl_llrdma_recv_mem_max 1048576 --mca btl_llrdma_coalesce 0 --mca btl_llrdma_verbose 5
  check "hint 8192, $size B, windows overcommitted: the SRQ limit event grew the pool" \
    grep -q "ll SRQ ran low: 6[0-9] more buffers posted" "$err"
done
incast "hint 8192, minimum allotment per peer (rnr_retry 6)" 400 8 \
  --mca btl_llrdma_size_hint 8192 --mca btl_llrdma_rnr_retry 6 --mca btl_llrdma_recv_mem_max 1
incast "hint 8192, no coalescing" 400 8 --mca btl_llrdma_size_hint 8192 --mca btl_llrdma_coalesce 0
incast "hint 65536, no coalescing" 400 8 --mca btl_llrdma_size_hint 65536 --mca btl_llrdma_coalesce 0
finish

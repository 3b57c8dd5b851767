#!/usr/bin/env bash
# btl/llrdma as an RDMA transport (Soft-RoCE VM only, --mca btl self,llrdma):
# ob1's rendezvous by RDMA read (RGET, the default) for every size from 1 B
# to 64 MB at hint 8K and to 4 MB at hints 0 and 64K (each 2^k and +-1; the
# guest is slow: ~3 min per 64 MB sweep) and at +-1 around every limit (LL
# fragment, eager limit with and without ob1's header, BW fragment, put/get
# fragment, twice and four times it) at each hint; 64 messages in flight each way; a
# non-contiguous datatype both ways; RPUT (btl_llrdma_rdma=put) and
# send/receive only (off) as controls.  Every byte is checked by t_llrdma
# (word pattern, length, no overrun); that RDMA carried the large messages is
# read from the finalize records of the dump (the "rdma" histogram), not
# from anything the BTL prints about itself.
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_llrdma"
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)
d=$(mktemp -d "${TMPDIR:-/tmp}/llrdma-rdma.XXXXXX")
trap 'rm -rf "$d"' EXIT
M=$((1 << 20))

# rdma_ops FILE: put/get operations counted in FILE's finalize record.
rdma_ops() {
  grep '"record":"finalize"' "$1" | sed -n 's/.*"rdma":{"count":\[\([0-9,]*\)\].*/\1/p' |
    tr , '\n' | awk '{ s += $1 } END { print s + 0 }'
}
# in_both PATTERN FILE1 FILE2
in_both() { grep -q -- "$1" "$2" && grep -q -- "$1" "$3"; }
granted='"rd_atomic_granted":[1-9][0-9]*,"dest_rd_atomic_granted":[1-9][0-9]*,"rdma_limit_granted":1048576'
# around N...: each N-1, N, N+1.
around() { for n in "$@"; do echo $((n - 1)) $n $((n + 1)); done; }

# hint, its LL fragment (0: none), BW eager limit = BW fragment (docs/profile.md),
# largest 2^k of the sweep.
for spec in "0 0 12288 65536 $((4 * M))" "8192 8192 65536 65536 $((64 * M))" \
  "65536 65536 131072 131072 $((4 * M))"; do
  set -- $spec
  hint=$1 ll=$2 eager=$3 frag=$4 max=$5
  limits=$(around $eager $((eager - 14)) $((eager - 16)) $frag $M $((2 * M)) $((4 * M)))
  [ $ll -gt 0 ] && limits="$limits $(around $ll)"
  launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint $hint \
    --mca btl_llrdma_dump "$d/h$hint-%r.json" "$T" sweep $max $limits
  grep "t_llrdma: " <<<"$out" | sed 's/^/# /'
  check_pass "hint $hint: 1 B..$((max / M)) MB (2^k +-1) and every limit +-1, each byte verified" \
    t_llrdma 2
  ops=$(( $(rdma_ops "$d/h$hint-0.json") + $(rdma_ops "$d/h$hint-1.json") ))
  echo "# hint $hint: $ops RDMA operations in the finalize records"
  # Every size above the eager limit is at least one get (ob1 cuts 1 MiB pieces).
  check "hint $hint: large messages went by RDMA (put/get counted)" [ "$ops" -ge 30 ]
  check "hint $hint: RDMA requested vs granted in both ranks' dumps" in_both "$granted" \
    "$d/h$hint-0.json" "$d/h$hint-1.json"
done

launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint 8K "$T" window 64 262144 2
check_pass "64 messages of 256 KB in flight each way, twice" t_llrdma 2
launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint 8K "$T" window 64 70000 3
check_pass "64 messages of 70000 B (just above the eager limit) in flight each way" t_llrdma 2
launch -np 2 "${B[@]}" --mca btl_llrdma_size_hint 8K "$T" vector 65536 4
grep "t_llrdma: " <<<"$out" | sed 's/^/# /'
check_pass "non-contiguous MPI_Type_vector (1 MB of 4-int blocks) both ways" t_llrdma 2

# RPUT: the receiver asks, the sender writes.
# shellcheck disable=SC2046  # around prints sizes, one per word
launch -np 2 "${B[@]}" --mca btl_llrdma_rdma put --mca btl_llrdma_dump "$d/put-%r.json" \
  "$T" sweep $((4 * M)) $(around $M)
check_pass "btl_llrdma_rdma=put: 1 B..4 MB verified" t_llrdma 2
ops=$(( $(rdma_ops "$d/put-0.json") + $(rdma_ops "$d/put-1.json") ))
check "btl_llrdma_rdma=put: RDMA writes carried the data ($ops operations)" [ "$ops" -ge 10 ]
# Control: without RDMA the same traffic is correct and counts no operation.
launch -np 2 "${B[@]}" --mca btl_llrdma_rdma off --mca btl_llrdma_dump "$d/off-%r.json" \
  "$T" sweep $((4 * M))
check_pass "btl_llrdma_rdma=off: 1 B..4 MB verified by send/receive" t_llrdma 2
ops=$(( $(rdma_ops "$d/off-0.json") + $(rdma_ops "$d/off-1.json") ))
check "btl_llrdma_rdma=off: no RDMA operation counted" [ "$ops" -eq 0 ]

# GPU registration on rxe: it has no dma-buf MRs (libibverbs' dummy op) and
# the guest has no nvidia_peermem: "none", and the job runs; forcing dmabuf
# stops MPI_Init naming the knob and why.
launch -np 2 "${B[@]}" --mca btl_llrdma_dump stderr "$T" sweep 1024
check_pass "gpu_rdma=auto on rxe: the job runs" t_llrdma 2
check_run "rxe's GPU probe says none (no dma-buf MRs) in the dump" \
  has '"gpu_rdma":"none (the device has no dma-buf MRs; neither nvidia_peermem nor nv_peer_mem is loaded)"'
launch -np 2 "${B[@]}" --mca btl_llrdma_gpu_rdma dmabuf "$T" sweep 1024
forced() { [ "$rc" -ne 0 ] && has "btl_llrdma_gpu_rdma = dmabuf (from environment" &&
  has "rxe0:1 cannot: the device has no dma-buf MRs"; }
check "btl_llrdma_gpu_rdma=dmabuf on rxe: MPI_Init stops and says why" forced
echo "$out" | grep -m2 "gpu_rdma" | sed 's/^/# /'

# llrdma-check shows what ob1 uses and the RDMA grant.
launch -np 2 "${B[@]}" "$top_builddir/llrdma-check"
echo "$out" | grep -E "to rank|RDMA" | sed 's/^/# /'
check_run "llrdma-check: ob1 uses llrdma for RDMA" count "rdma=llrdma" 2
check_run "llrdma-check: RDMA requested/granted line" \
  has "bw RDMA requested/granted: reads outstanding 16/[1-9]"
check_run "llrdma-check: gpu_rdma per rank" count "gpu_rdma: none (the device has no dma-buf" 2
finish

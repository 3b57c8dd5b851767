#!/usr/bin/env bash
# The GPU-direct inter-node step (docs/allreduce.md, "GPU-direct inter-node
# step"), Soft-RoCE VM only: device vectors of a hierarchical communicator
# cross "nodes" (coll_llrdma_node_split) by btl/llrdma RDMA writes from and
# into GPU memory, reduced by the GPU.  The GPU is the fake of
# tests/fakegpu (libfakegpu.so as libcuda.so.1 and libllrdma_cuda.so) with
# its device memory mapped so that rxe can pin it (FAKEGPU_NIC_VISIBLE=1),
# and btl/llrdma is told nvidia_peermem is loaded (LLRDMA_TEST_PEERMEM=1),
# so it registers that memory as it would on a GPU node with peermem.  What
# ran is read from coll/llrdma's per-call lines ("device vector,
# gpu-direct"), the fake's counters (no message staged through host memory)
# and btl/llrdma's count of GPU memory registrations, which must not grow
# with the number of calls on the same buffers (registered once, reused).
# Each rank checks every element against the sums it computes itself; the
# fake-GPU suite's types and ops are checked against the host path.
. ./tests/mpi/env.sh
. "$top_srcdir/tests/fakegpu/env.sh"
export FAKEGPU_NIC_VISIBLE=1 LLRDMA_TEST_PEERMEM=1
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1
  --mca coll_llrdma_internode_transport btl
  --mca coll_llrdma_gpu_peer off --mca coll_llrdma_verbose 10 --mca btl_llrdma_verbose 5
  -x LLRDMA_CUDA_LIB -x FAKEGPU_NIC_VISIBLE -x LLRDMA_TEST_PEERMEM -x LD_LIBRARY_PATH)
t=${LLRDMA_TEST_TIMEOUT:-300}
export LLRDMA_TEST_TIMEOUT=$((t < 600 ? 600 : t))

# The sum of the GPU registrations every rank's btl/llrdma made.
gpu_regs() {
  sed -n 's/.*btl:llrdma: .*: \([0-9]*\) GPU memory registration(s).*/\1/p' <<<"$out" |
    awk '{ s += $1 } END { print s + 0 }'
}
direct_only() { has "device vector, gpu-direct" && lacks "device vector, host-copy"; }

check "libfakegpu.so built" test -f "$FAKE"
# 100000 int64 on 2+2: two slices of 400 KB, Rabenseifner halves over btl_put.
launch -np 4 "${B[@]}" --mca coll_llrdma_node_split 2 "$T" --direct 1 100000
check_pass "2+2, 800 KB device vectors, 1 call: every element right, nothing staged" $P 4
check_run "2+2: the call took the GPU-direct step" direct_only
check_run "2+2: the world communicator says device vectors go GPU-direct" \
  has "device vectors on rank 0: GPU-direct"
one=$(gpu_regs)
check "btl/llrdma registered GPU memory ($one registrations)" test "$one" -gt 0
launch -np 4 "${B[@]}" --mca coll_llrdma_node_split 2 "$T" --direct 6 100000
check_pass "2+2, 6 calls on the same device vectors" $P 4
check_run "2+2, 6 calls: every call GPU-direct" direct_only
six=$(gpu_regs)
check "registered once, reused: $six registrations for 6 calls, $one for 1" test "$six" -eq "$one"
# Every type of t_allreduce_fakegpu's suite, each with its op, at 1 to 70001
# elements, on device and managed memory (and one call with host buffers on
# half the ranks): each result bitwise the host path's.
launch -np 4 "${B[@]}" --mca coll_llrdma_node_split 2 -x FAKEGPU_EXPECT_STAGING=0 "$T"
check_pass "2+2, the fake-GPU suite (types x ops, device and managed memory)" $P 4
check_run "2+2 suite: device vectors went GPU-direct" has "device vector, gpu-direct"
# Irregular (3+1: one slice, a node of one rank), the ring forced.
launch -np 4 "${B[@]}" --mca coll_llrdma_node_split 3,1 \
  --mca coll_llrdma_allreduce_algorithm ring --mca coll_llrdma_allreduce_segment_size 64K \
  "$T" --direct 3 70001
check_pass "3+1, ring, 3 calls of 560 KB" $P 4
check_run "3+1: GPU-direct" direct_only
# Without the NIC's GPU registration (btl_llrdma_gpu_rdma off) the same job
# copies device vectors to host memory, said per call, and is still right.
launch -np 4 "${B[@]}" --mca coll_llrdma_node_split 2 --mca btl_llrdma_gpu_rdma off "$T" \
  --direct 2 100000
check_pass "gpu_rdma off: host copies, every element right" $P 4
check_run "gpu_rdma off: host-copy, never GPU-direct" \
  eval 'has "device vector, host-copy" && lacks "device vector, gpu-direct"'
finish

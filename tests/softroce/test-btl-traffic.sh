#!/usr/bin/env bash
# btl/llrdma under mixed traffic: 10^4 random-size messages (bursts of 32 per
# rank, sizes across the LL, BW-eager and rendezvous ranges) with contents
# verified, MPI_Alltoall and MPI_Allreduce, on 2 and 4 ranks; and llrdma next
# to vader.  Soft-RoCE VM only.  A rank that finds a wrong byte or value
# aborts the job: each check requires exit status 0, no FAIL line and every
# rank's PASS line (env.sh: check_pass).
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_llrdma"
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)

pass() { # DESCRIPTION NRANKS, then mpirun arguments (-np NRANKS among them)
  local d=$1 n=$2; shift 2
  launch "$@"
  grep "t_llrdma\|FAIL\|llrdma: transport" <<<"$out" | sed 's/^/# /'
  check_pass "$d" t_llrdma "$n"
}

pass "4 ranks, hint 8K: 4x2500 random messages verified" 4 \
  -np 4 "${B[@]}" --mca btl_llrdma_size_hint 8K "$T" random 2500 11 70000
pass "2 ranks, no hint: 2000 random messages verified" 2 \
  -np 2 "${B[@]}" "$T" random 2000 12 40000
pass "2 ranks, shallow LL queue (4 WRs): bursts wait in order" 2 \
  -np 2 "${B[@]}" --mca btl_llrdma_size_hint 4K --mca btl_llrdma_ll_sq_depth 4 \
  "$T" random 1000 13 6000
pass "4 ranks, hint 8K: Alltoall + Allreduce" 4 \
  -np 4 "${B[@]}" --mca btl_llrdma_size_hint 8K "$T" coll 2 65536
pass "2 ranks, no hint: Alltoall + Allreduce" 2 \
  -np 2 "${B[@]}" "$T" coll 2 262144
pass "self,vader,llrdma: 4 ranks run" 4 \
  -np 4 --mca pml ob1 --mca btl self,vader,llrdma --bind-to none --mca mpi_yield_when_idle 1 \
  --mca btl_llrdma_size_hint 8K "$T" coll 1 4096
finish

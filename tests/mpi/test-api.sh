#!/usr/bin/env bash
# Public API: setter before/after MPI_Init, the report's aliases, MPI_T.
. ./tests/mpi/env.sh

for n in 1 2; do
  out=$(mpi -np $n "$TAPI" set 4096 2>&1)
  check "$n ranks: llrdma_set_size_hint before MPI_Init, refused after" grep -q "t_api: PASS" <<<"$out"
done
out=$(mpi -np 2 "$TAPI" alias 8192 2>&1)
check "set/get_low_latency_rdma_size_hint aliases" grep -q "t_api: PASS" <<<"$out"
out=$(mpi -np 2 --mca btl_llrdma_size_hint 2M "$TAPI" expect 2097152 env 2>&1)
check "getter after MPI_Init returns the effective hint" grep -q "t_api: PASS" <<<"$out"
out=$(mpi -np 1 --mca btl_llrdma_size_hint 16K "$TAPI" mpit 2>&1)
check "MPI_T reads btl_llrdma_size_hint" grep -q "MPI_T btl_llrdma_size_hint = '16K'" <<<"$out"
out=$(mpi -np 1 "$TAPI" gradient 2>&1)
check "llrdma_hint_for_gradient edge cases" grep -q "t_api: PASS" <<<"$out"
finish

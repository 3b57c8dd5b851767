#!/usr/bin/env bash
# Public API: setter before/after MPI_Init, the report's aliases, MPI_T.
. ./tests/mpi/env.sh

for n in 1 2; do
  launch -np $n "$TAPI" set 4096
  check_pass "$n ranks: llrdma_set_size_hint before MPI_Init, refused after" t_api $n
done
launch -np 2 "$TAPI" alias 8192
check_pass "set/get_low_latency_rdma_size_hint aliases" t_api 2
launch -np 2 --mca btl_llrdma_size_hint 2M "$TAPI" expect 2097152 env
check_pass "getter after MPI_Init returns the effective hint" t_api 2
launch -np 1 --mca btl_llrdma_size_hint 16K "$TAPI" mpit
check_pass "MPI_T: t_api mpit ran" t_api 1
check_run "MPI_T reads btl_llrdma_size_hint" has "MPI_T btl_llrdma_size_hint = '16K'"
launch -np 1 "$TAPI" gradient
check_pass "llrdma_hint_for_gradient edge cases" t_api 1
finish

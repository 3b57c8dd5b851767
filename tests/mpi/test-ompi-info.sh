#!/usr/bin/env bash
# ompi_info lists every llrdma knob with help text.
. ./tests/mpi/env.sh

btl=$("$OMPI_INFO" --param btl llrdma --level 9 --parsable 2>&1)
for k in size_hint dump verbose if_include if_exclude ll_sq_depth bw_sq_depth ll_inline \
         bw_signal_interval bw_cq_moderation_count bw_cq_moderation_usec cm_timeout cm_poll_every; do
  check "btl_llrdma_$k listed with help text" \
    grep -q "^mca:btl:llrdma:param:btl_llrdma_$k:help:..." <<<"$btl"
done
coll=$("$OMPI_INFO" --param coll llrdma --level 9 --parsable 2>&1)
for k in priority verbose size_hint allreduce_algorithm allreduce_segment_size mismatch_action \
         gpu_stage_max gpu_fold_min shm shm_chunk_size; do
  check "coll_llrdma_$k listed with help text" \
    grep -q "^mca:coll:llrdma:param:coll_llrdma_$k:help:..." <<<"$coll"
done
check "size_hint is a string (validated by llrdma, not Open MPI)" \
  grep -q "^mca:btl:llrdma:param:btl_llrdma_size_hint:type:string" <<<"$btl"
# Human-readable form shows the help text too.
check "ompi_info human output shows the size hint help" \
  bash -c "'$OMPI_INFO' --param btl llrdma --level 9 | grep -q 'Low-latency RDMA size hint'"
finish

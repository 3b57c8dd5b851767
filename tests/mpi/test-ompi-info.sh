#!/usr/bin/env bash
# ompi_info lists every llrdma knob with help text.
. ./tests/mpi/env.sh

capture "$OMPI_INFO" --param btl llrdma --level 9 --parsable
for k in size_hint dump verbose if_include if_exclude ll_sq_depth bw_sq_depth ll_inline \
         bw_signal_interval bw_cq_moderation_count bw_cq_moderation_usec cm_timeout cm_poll_every \
         connect_timeout gid_index roce_version min_rnr_timer rnr_retry retry_count ack_timeout completion_timeout recv_mem_max \
         stall_warn fork_safe coalesce sq_batch wr_api rdma gpu_rdma progress_thread progress_thread_ll_idle; do
  check_run "btl_llrdma_$k listed with help text" \
    has "^mca:btl:llrdma:param:btl_llrdma_$k:help:..."
done
check_run "size_hint is a string (validated by llrdma, not Open MPI)" \
  has "^mca:btl:llrdma:param:btl_llrdma_size_hint:type:string"
capture "$OMPI_INFO" --param coll llrdma --level 9 --parsable
for k in priority verbose size_hint allreduce_algorithm allreduce_segment_size mismatch_action \
         gpu_stage_max gpu_fold_min shm shm_chunk_size shm_lines_max shm_share_min shm_stream_min shm_share_ranks shm_liveness_ms scratch_cache_max \
         internode_transport wait_spin_us wait_sleep_ms; do
  check_run "coll_llrdma_$k listed with help text" \
    has "^mca:coll:llrdma:param:coll_llrdma_$k:help:..."
done
for v in 0:auto 3:ring 5:shm_split; do
  check_run "coll_llrdma_allreduce_algorithm enumerates $v" \
    has "^mca:coll:llrdma:param:coll_llrdma_allreduce_algorithm:enumerator:value:$v\$"
done
for v in 0:auto 1:pml 2:btl; do
  check_run "coll_llrdma_internode_transport enumerates $v" \
    has "^mca:coll:llrdma:param:coll_llrdma_internode_transport:enumerator:value:$v\$"
done
check_run "coll_llrdma_mismatch_action enumerates warn" \
  has "^mca:coll:llrdma:param:coll_llrdma_mismatch_action:enumerator:value:1:warn\$"
# Human-readable form shows the help text too.
capture "$OMPI_INFO" --param btl llrdma --level 9
check_run "ompi_info human output shows the size hint help" has "Low-latency RDMA size hint"
finish

#!/usr/bin/env bash
# Bad hints stop MPI_Init on every rank with one clear message: the parameter,
# the text and its source.  Never a hang (mpi() has a time limit).
. ./tests/mpi/env.sh

expect_fail() { # DESCRIPTION PATTERN... -- MPIRUN ARGS
  local d=$1; shift
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  launch "$@"
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    not_ok "$d (exit $rc)"; echo "$out" | sed 's/^/# /' | tail -20; return
  fi
  if has "t_ring rank [0-9]*: PASS"; then
    not_ok "$d (the application ran)"; echo "$out" | sed 's/^/# /' | tail -20; return
  fi
  for p in "${pats[@]}"; do
    if ! grep -qF -- "$p" <<<"$out"; then
      not_ok "$d (missing '$p')"; echo "$out" | sed 's/^/# /' | tail -20; return
    fi
  done
  ok "$d"
}

for bad in abc -1 16X 1.5K 99999999999999999999 2G ' '; do
  expect_fail "env hint '$bad' fails MPI_Init" "btl_llrdma_size_hint" "'$bad'" \
    "OMPI_MCA_btl_llrdma_size_hint" -- \
    -np 2 -x OMPI_MCA_btl_llrdma_size_hint="$bad" "$TRING"
done
expect_fail "--mca hint '16X' on 4 ranks" "btl_llrdma_size_hint" "'16X'" -- \
  -np 4 --mca btl_llrdma_size_hint 16X "$TRING"

mkdir -p "$HOME/.openmpi"
printf 'btl_llrdma_size_hint = 1.5K\n' > "$HOME/.openmpi/mca-params.conf"
if ompi5; then
  # mpirun 5 passes the file's values on as environment (docs/design.md).
  expect_fail "file hint '1.5K' fails MPI_Init (Open MPI 5: as environment)" "'1.5K'" \
    "OMPI_MCA_btl_llrdma_size_hint" -- -np 2 "$TRING"
else
  expect_fail "file hint '1.5K' names file and line" "'1.5K'" \
    "$HOME/.openmpi/mca-params.conf:1" -- -np 2 "$TRING"
fi
rm -f "$HOME/.openmpi/mca-params.conf"

expect_fail "alias RDMA_LOW_LATENCY_HINT=abc" "RDMA_LOW_LATENCY_HINT" "'abc'" -- \
  -np 2 -x RDMA_LOW_LATENCY_HINT=abc "$TRING"

# btl/llrdma connection and fabric knobs: checked in MPI_Init, device or not.
expect_fail "rnr_retry above 7" "btl_llrdma_rnr_retry = 8" "at most 7" -- \
  -np 2 --mca btl_llrdma_rnr_retry 8 "$TRING"
expect_fail "retry_count above 7" "btl_llrdma_retry_count = 9" "at most 7" -- \
  -np 2 --mca btl_llrdma_retry_count 9 "$TRING"
expect_fail "ack_timeout above 31" "btl_llrdma_ack_timeout = 32" "at most 31" -- \
  -np 2 --mca btl_llrdma_ack_timeout 32 "$TRING"
expect_fail "completion_timeout below -1" "btl_llrdma_completion_timeout = -2" "at least -1" -- \
  -np 2 --mca btl_llrdma_completion_timeout -2 "$TRING"
expect_fail "min_rnr_timer above 31" "btl_llrdma_min_rnr_timer = 32" "at most 31" \
  "OMPI_MCA_btl_llrdma_min_rnr_timer" -- \
  -np 2 -x OMPI_MCA_btl_llrdma_min_rnr_timer=32 "$TRING"
expect_fail "connect_timeout 0" "btl_llrdma_connect_timeout = 0" "at least 1" -- \
  -np 2 --mca btl_llrdma_connect_timeout 0 "$TRING"
expect_fail "fork_safe not auto/yes/no" "btl_llrdma_fork_safe = 'sometimes'" \
  "not one of auto, yes, no" -- -np 2 --mca btl_llrdma_fork_safe sometimes "$TRING"
expect_fail "wr_api not 0/1" "btl_llrdma_wr_api = 2" "1 (on) or 0 (off)" -- \
  -np 2 --mca btl_llrdma_wr_api 2 "$TRING"
expect_fail "coalesce not 0/1" "btl_llrdma_coalesce = -1" "1 (on) or 0 (off)" -- \
  -np 2 --mca btl_llrdma_coalesce -1 "$TRING"
expect_fail "sq_batch not 0/1" "btl_llrdma_sq_batch = 3" "1 (on) or 0 (off)" -- \
  -np 2 --mca btl_llrdma_sq_batch 3 "$TRING"
expect_fail "progress_thread not 0/1" "btl_llrdma_progress_thread = 3" "1 (on) or 0 (off)" -- \
  -np 2 --mca btl_llrdma_progress_thread 3 "$TRING"
expect_fail "rdma not get/put/off" "btl_llrdma_rdma = 'rget'" "not one of get, put, off" -- \
  -np 2 --mca btl_llrdma_rdma rget "$TRING"
expect_fail "gpu_rdma not auto/dmabuf/peermem/off" "btl_llrdma_gpu_rdma = 'yes'" \
  "not one of auto, dmabuf, peermem, off" -- -np 2 --mca btl_llrdma_gpu_rdma yes "$TRING"
# A forced GPU mode is never downgraded: without an RDMA device it stops MPI_Init.
expect_fail "gpu_rdma=dmabuf without an RDMA device" "btl_llrdma_gpu_rdma = dmabuf" \
  "no RDMA device to register GPU memory with" -- -np 2 --mca btl_llrdma_gpu_rdma dmabuf "$TRING"
expect_fail "roce_version not auto/1/2" "btl_llrdma_roce_version" "3" -- \
  -np 2 --mca btl_llrdma_roce_version 3 "$TRING"
expect_fail "device_policy not nearest/all/list" "btl_llrdma_device_policy = 'closest'" \
  "not one of nearest, all, list" -- -np 2 --mca btl_llrdma_device_policy closest "$TRING"
expect_fail "device_policy list without btl_llrdma_devices" "btl_llrdma_device_policy = 'list'" \
  "list needs btl_llrdma_devices" -- -np 2 --mca btl_llrdma_device_policy list "$TRING"
expect_fail "btl_llrdma_devices without policy list" "btl_llrdma_devices = 'mlx5_0'" \
  "applies to btl_llrdma_device_policy list only" -- -np 2 --mca btl_llrdma_devices mlx5_0 "$TRING"
expect_fail "gid_index below -1" "btl_llrdma_gid_index" "-5" -- \
  -np 2 --mca btl_llrdma_gid_index -5 "$TRING"

expect_fail "coll wait spin below -1" "coll_llrdma_wait_spin_us = '-5'" "below -1" -- \
  -np 2 --mca coll_llrdma_wait_spin_us -5 "$TRING"
expect_fail "coll wait sleep negative" "coll_llrdma_wait_sleep_ms = '-1'" "negative" -- \
  -np 2 --mca coll_llrdma_wait_sleep_ms -1 "$TRING"
expect_fail "bad coll algorithm name" "coll_llrdma_allreduce_algorithm" "'fastest'" -- \
  -np 2 --mca coll_llrdma_allreduce_algorithm fastest "$TRING"
expect_fail "bad coll segment size" "coll_llrdma_allreduce_segment_size" "'4Q'" -- \
  -np 2 --mca coll_llrdma_allreduce_segment_size 4Q "$TRING"
expect_fail "bad coll size hint" "coll_llrdma_size_hint" "'x1'" -- \
  -np 2 --mca coll_llrdma_size_hint x1 "$TRING"
# Well-formed, but its groups do not cover the job: found when
# MPI_COMM_WORLD is set up (coll_llrdma_check.c), still before the program.
expect_fail "coll node_split larger than the job" "coll_llrdma_node_split = '3,3'" \
  "the groups cover 6 ranks, the job has 4" -- -np 4 --mca coll_llrdma_node_split 3,3 "$TRING"
expect_fail "bad GPU staging threshold" "coll_llrdma_gpu_stage_max" "'2Z'" -- \
  -np 2 --mca coll_llrdma_gpu_stage_max 2Z "$TRING"
expect_fail "shm knob not 0 or 1" "coll_llrdma_shm" "'2'" "not 0 or 1" -- \
  -np 2 --mca coll_llrdma_shm 2 "$TRING"
expect_fail "shm chunk not a multiple of 64" "coll_llrdma_shm_chunk_size" "'100'" "multiple of 64" -- \
  -np 2 --mca coll_llrdma_shm_chunk_size 100 "$TRING"
expect_fail "bad shm chunk" "coll_llrdma_shm_chunk_size" "'1T'" -- \
  -np 2 --mca coll_llrdma_shm_chunk_size 1T "$TRING"
expect_fail "shm lines above 2K" "coll_llrdma_shm_lines_max" "'4K'" "above the maximum 2K" -- \
  -np 2 --mca coll_llrdma_shm_lines_max 4K "$TRING"
expect_fail "bad shared-fold threshold" "coll_llrdma_shm_share_min" "'1Q'" -- \
  -np 2 --mca coll_llrdma_shm_share_min 1Q "$TRING"
expect_fail "bad streamed copy-out threshold" "coll_llrdma_shm_stream_min" "'big'" -- \
  -np 2 --mca coll_llrdma_shm_stream_min big "$TRING"
expect_fail "shared fold below 2 ranks" "coll_llrdma_shm_share_ranks" "'1'" "below 2" -- \
  -np 2 --mca coll_llrdma_shm_share_ranks 1 "$TRING"
expect_fail "bad GPU fold threshold" "coll_llrdma_gpu_fold_min" "'64KK'" -- \
  -np 2 --mca coll_llrdma_gpu_fold_min 64KK "$TRING"
expect_fail "bad mismatch action" "coll_llrdma_mismatch_action" "'maybe'" -- \
  -np 2 --mca coll_llrdma_mismatch_action maybe "$TRING"
expect_fail "bad inter-node transport" "coll_llrdma_internode_transport" "'rdma'" \
  "not one of auto, pml, btl" -- -np 2 --mca coll_llrdma_internode_transport rdma "$TRING"
expect_fail "profile override out of range" "btl_llrdma" "out of range" -- \
  -np 2 --mca btl_llrdma_ll_sq_depth 100000 "$TRING"

# Excluded BTL: coll/llrdma still validates the hint it reads.
expect_fail "bad hint with btl/llrdma excluded is caught by coll" "'abc'" -- \
  -np 2 --mca btl self,vader -x OMPI_MCA_btl_llrdma_size_hint=abc "$TRING"
finish

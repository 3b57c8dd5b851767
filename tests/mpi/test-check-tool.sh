#!/usr/bin/env bash
# llrdma-check on 1, 2 and 4 ranks.
. ./tests/mpi/env.sh

for n in 1 2 4; do
  launch -np $n --mca btl_llrdma_size_hint 16K "$CHECK"
  check "$n ranks: exit 0 (exit $rc)" test $rc -eq 0
  check_run "$n ranks: verdict line" has "all $n ranks agree: size hint 16K"
  check_run "$n ranks: one table row per rank" count '^ *[0-9]\+  [^ ]\+ \+[0-9]\+ ' $n
  # All ranks on this node: the arena's algorithms (the message ones below).
  plan() {
    has "Allreduce plan for $n ranks on 1 node ($n), MPI_DOUBLE, coll hint 16K" &&
      { [ $n -eq 1 ] || { has "shared-memory arena (all ranks on one node)" &&
                            has "^ \+64M  shm_split "; }; }
  }
  check_run "$n ranks: Allreduce plan table for the hint" plan
  launch -np $n --mca btl_llrdma_size_hint 16K "$CHECK" --json
  check_run "$n ranks: --json one object per rank with rank/host/size_hint/source" \
    count '^{"rank":[0-9]*,.*"host":".*"size_hint":16384,.*"source":"env"' $n
done
launch -np 4 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_shm 0 "$CHECK"
message_algs() {
  lacks "shared-memory arena" && has "^ \+64M  rabenseifner " && has "^ \+4K  recursive_doubling "
}
check_run "arena off: the message algorithms for the hint" message_algs
devpath_off() { has "^ \+32K  host-copy " && has "^ \+16M  gpu  *reduced on the GPU, staged through the PML"; }
check_run "arena off: CUDA device vectors staged whole up to 2M, then through the PML" devpath_off
# Which verbs devices each rank uses: none on a node without RDMA (the device
# policy itself is tested on sysfs fixtures by tests/unit/test_nic).
check_run "devices line per rank (policy nearest by default)" count "^      devices (nearest" 4
launch -np 2 --mca btl_llrdma_device_policy all "$CHECK"
check_run "devices line follows btl_llrdma_device_policy" count "^      devices (all" 2
launch -np 2 --mca btl_llrdma_size_hint 16K "$CHECK"
devpath() {
  has "CUDA device vectors (coll_llrdma_gpu_peer auto from 64K, gpu_stage_max auto = 16K)" &&
    has "^ \+4K  host-copy " && has "^ \+32K  gpu  *reduced on the GPU, staged through the arena" &&
    has "^ \+256K  gpu-peer  *CUDA IPC.*(without peer access: gpu)"
}
check_run "CUDA device vectors: the path per size (defaults)" devpath
launch -np 2 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_gpu_peer off \
  --mca coll_llrdma_gpu_stage_max 1M "$CHECK"
devpath_knobs() { has "^ \+256K  host-copy " && has "^ \+2M  gpu " && lacks "gpu-peer"; }
check_run "CUDA device vectors: gpu_peer off, gpu_stage_max 1M" devpath_knobs
empty=$(mktemp -d "$LLRDMA_TEST_HOME/empty.XXXX")
OMPI_MCA_mca_base_component_path="$empty:SYS_DEFAULT" launch -np 2 "$CHECK"
check "components not loaded: exit 2 (exit $rc)" test $rc -eq 2
check "components not loaded: names mca_base_component_path" has mca_base_component_path
launch -np 2 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_allreduce_algorithm rabenseifner \
  --mca coll_llrdma_size_hint 4K "$CHECK"
forced() { has "coll hint 4K (algorithm forced)" && lacks "^ \+[0-9KM]\+  \(ring\|recursive\)"; }
check_run "plan table follows the coll knobs" forced
# Next to UCX (issue 27): pml/ucx drives the network itself, so a hint set
# for btl/llrdma does nothing there.  UCX's shared-memory transports only
# (UCX_TLS): they run without an RDMA device, and Debian 12's UCX over
# Soft-RoCE aborted in MPI_Finalize in the guest (opal_common_ucx_del_procs).
UCX=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=self,sm)
launch -np 2 "${UCX[@]}" --mca btl_llrdma_size_hint 8K "$CHECK"
if has "PML ucx cannot be selected"; then
  skip "pml ucx with a hint: exit 4, every rank says so, one line per job" "pml/ucx cannot run here"
else
  ucx_hint() {
    [ $rc -eq 4 ] && count "^ *network: btl/llrdma carries nothing: the selected PML is ucx" 2 &&
      has "^llrdma-check: btl/llrdma carries no traffic to other nodes on 2 of 2 ranks" &&
      has "btl_llrdma_size_hint=8K (environment) has no effect" && has "run with --mca pml ob1" &&
      count "llrdma: btl/llrdma carries nothing: .*(rank 0's view" 1
  }
  check "pml ucx with a hint: exit 4 (exit $rc), every rank says so, one line per job" ucx_hint
  launch -np 2 "${UCX[@]}" "$CHECK"
  ucx_plain() {
    [ $rc -eq 0 ] && count "^ *network: btl/llrdma carries nothing: the selected PML is ucx" 2 &&
      lacks "has no effect" && lacks "rank 0's view"
  }
  check_run "pml ucx without any btl_llrdma knob: said per rank, exit 0 (exit $rc)" ucx_plain
fi
launch -np 2 --mca btl_llrdma_size_hint 8K "$CHECK"
ob1_local() { [ $rc -eq 0 ] && count "^ *network: all peers looked at run on this node" 2; }
check_run "ob1 on one node: shared memory carries the traffic, exit 0 (exit $rc)" ob1_local

rc=0; "$CHECK" --bogus >/dev/null 2>&1 || rc=$?
check "unknown option: exit 3 (exit $rc)" test $rc -eq 3
capture "$CHECK" --help
check_run "--help documents the exit codes" has "Exit status"
finish

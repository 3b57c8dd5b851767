#!/usr/bin/env bash
# Allreduce when more ranks share the machine than it has CPUs and mpirun
# does not know (mpi_yield_when_idle 0, as under a cpuset or CPU quota):
# llrdma against tuned, RUNS alternated runs of allreduce-compare (issue 26's
# goal: <= 0.1x tuned at 64 B and 64 KB, 4 ranks on 2 CPUs).
#   contrib/bench/oversub-bench.sh BUILD_DIR [RANKS] [RUNS]
set -u
build=$(readlink -f "${1:?build directory}")
n=${2:-4}; runs=${3:-3}
export OMPI_MCA_mca_base_component_path="$build/.libs:SYS_DEFAULT" LD_LIBRARY_PATH="$build/.libs"
export OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u) $(nproc) CPUs, $n ranks, $(mpirun --version | head -1)"
for k in $(seq "$runs"); do
  for shm in 1 0; do
    echo "=== run $k, coll_llrdma_shm $shm"
    timeout 600 "$build/llrdma-bench" allreduce-compare --np "$n" --colls llrdma,tuned \
      --mpirun-args "--oversubscribe --mca mpi_yield_when_idle 0 --mca btl self,vader --mca coll_llrdma_shm $shm" \
      -- --sizes 64,64K --iters 200 --warmup 20 --verify 2>&1 |
      grep -E "^ +(size|[0-9]+ [KM]?B)|verify: FAILED|served by"
  done
done

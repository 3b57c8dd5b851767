#!/usr/bin/env bash
# Resident memory of one large Allreduce without the arena (issue 26's goal:
# at most 64 MB more per rank than the buffers): peak RSS per rank
# (getrusage, printed by llrdma-bench --rss) of SIZE (default 256M) on N
# ranks, coll/llrdma with each message algorithm, and coll/tuned for scale.
#   contrib/bench/scratch-mem.sh BUILD_DIR [N] [SIZE]
set -u
build=$(readlink -f "${1:?build directory}")
n=${2:-2}; size=${3:-256M}
export OMPI_MCA_mca_base_component_path="$build/.libs:SYS_DEFAULT" LD_LIBRARY_PATH="$build/.libs"
export OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u) $(nproc) CPUs, $n ranks, $size bytes (doubles), $(mpirun --version | head -1)"
run() { # NAME MPIRUN-ARGS...
  local name=$1; shift
  local out
  out=$(timeout 600 mpirun --oversubscribe -np "$n" --mca btl self,vader "$@" \
    "$build/llrdma-bench" allreduce --sizes "$size" --iters 3 --warmup 1 --verify --rss 2>&1)
  echo "$name: $(grep -o 'peak RSS .*before' <<<"$out" | head -1); $(grep -o 'allreduce served by: [^ ]*' <<<"$out" | head -1); $(grep -c 'all results correct' <<<"$out") verified"
}
run tuned --mca coll tuned,basic,libnbc,self
for alg in auto recursive_doubling rabenseifner ring; do
  run "llrdma $alg" --mca coll_llrdma_shm 0 --mca coll_llrdma_allreduce_algorithm "$alg"
done

#!/usr/bin/env bash
# Allreduce on 2 ranks of this machine, llrdma against tuned, RUNS alternated
# runs of allreduce-compare, back to back on the same buffers (cache-warm, no
# --verify; issue 26's goals: <= 0.7x tuned at 64 B-64 KB, <= 0.85x at 1 MB),
# then one --verify run for correctness.
#   contrib/bench/two-rank-bench.sh BUILD_DIR [RUNS]
set -u
build=$(readlink -f "${1:?build directory}")
runs=${2:-3}
export OMPI_MCA_mca_base_component_path="$build/.libs:SYS_DEFAULT" LD_LIBRARY_PATH="$build/.libs"
export OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S=(--sizes 64,1K,4K,16K,64K,256K,1M --iters 500 --warmup 50)
echo "# $(date -u) $(nproc) CPUs, 2 ranks, $(mpirun --version | head -1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in $(seq "$runs"); do
  echo "=== run $k"
  timeout 600 "$build/llrdma-bench" allreduce-compare --np 2 --colls llrdma,tuned \
    --mpirun-args "--mca btl self,vader" -- "${S[@]}" 2>&1 | grep -E "^ +(size|[0-9]+ [KM]?B)|served by"
done
echo "=== verified run"
timeout 600 "$build/llrdma-bench" allreduce-compare --np 2 --colls llrdma,tuned \
  --mpirun-args "--mca btl self,vader" -- "${S[@]}" --verify 2>&1 | grep -E "verify:"

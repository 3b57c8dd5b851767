#!/usr/bin/env bash
# Host-buffer Allreduce, llrdma against tuned and han in one run each (issue
# 26's goal: <= 0.6x at every size), on a device machine after an llrdma
# build with CUDA (so host calls go through the GPU-capable code path, as a
# CUDA build on a GPU node would).  Ranks bound to cores.  Tables and CSVs
# under $OUT/hc.
#   bash contrib/bench/h200-host-compare.sh PREFIX   (PREFIX: an installed llrdma)
set -u
prefix=$(readlink -f "$1")
OUT=${OUT:-/tmp/out}; R=$OUT/hc; mkdir -p "$R"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
export PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib"
export OMPI_MCA_mca_base_component_path="$prefix/lib/openmpi:SYS_DEFAULT"
{ date -u; nproc; mpirun --version | head -1; nvidia-smi --query-gpu=name --format=csv,noheader; } > "$R/machine.txt" 2>&1
for n in ${HOST_RANKS:-8 16}; do
  echo "=== $n ranks"
  timeout 200 llrdma-bench allreduce-compare --np "$n" --colls llrdma,tuned,han \
    --mpirun-args "--bind-to core" --csv "$R/host-np$n.csv" -- \
    --sizes 64,4K,64K,256K,1M,4M --iters 200 --verify 2>&1 | tee "$R/host-np$n.txt"
done

#!/usr/bin/env bash
# Benchmark and GPU-test run on the H200 device machines (Ubuntu 24.04, Open MPI
# 4.1.6, CUDA 13; `nvidia-h200-x2`: 2 GPUs, 32 cores), from a `make dist`
# tarball.  The steps behind the dated H200 tables in docs/benchmarks-h200.md.
# Writes CSVs and logs under $OUT/res (tar it: the device tool returns at most
# 8 files).
#   make dist here, then on the machine:  bash contrib/bench/h200-run.sh llrdma-*.tar.gz
# DEV_RANKS (default "2 4 8"), HOST_RANKS ("4 8 16"), NCCL=0 to skip NCCL.
set -u
tarball=$(readlink -f "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-/tmp/out}
R=$OUT/res
mkdir -p "$R"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
export NCCL_NVLS_ENABLE=0   # NVLink multicast stays off on these machines
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
# The image's Open MPI cannot use CMA inside the container; both sides of
# every comparison run with the same setting.
grep -q single_copy /etc/openmpi/openmpi-mca-params.conf 2>/dev/null ||
  printf 'btl_vader_single_copy_mechanism = none\n' >> /etc/openmpi/openmpi-mca-params.conf
# shellcheck source=contrib/bench/h200-lib.sh
. "$here/h200-lib.sh"
mapfile -t json_args < <(json_configure_args) # nlohmann-json: see h200-lib.sh
work=/tmp/llrdma-h200
rm -rf "$work" && mkdir -p "$work" && tar -xzf "$tarball" -C "$work" && cd "$work"/llrdma-* || exit 1
export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
{ ./configure --prefix="$work/inst" --with-cuda=/usr/local/cuda "${json_args[@]}" && make -j"$(nproc)" &&
  make install && make -j"$(nproc)" tests/gpu/t_allreduce_gpu; } > "$R/build.log" 2>&1 ||
  { tail -40 "$R/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"
export PATH="$work/inst/bin:$PATH" LD_LIBRARY_PATH="$work/inst/lib"
export OMPI_MCA_mca_base_component_path="$work/inst/lib/openmpi:SYS_DEFAULT"
{ date -u; uname -a; nvidia-smi --query-gpu=name,driver_version --format=csv; nvidia-smi topo -m
  mpirun --version | head -1; nproc; lscpu | grep -E 'Model name|L2|L3'
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} > "$R/machine.txt" 2>&1

step() { echo "=== $* ($((SECONDS - t0)) s)"; }
step "GPU tests"
mkdir -p "$R/gpu-logs"
LLRDMA_GPU_LOGS="$R/gpu-logs" LLRDMA_TEST_TIMEOUT=100 timeout -k 5 220 \
  tests/gpu/run-gpu-tests.sh > "$R/gpu-tests.txt" 2>&1; echo "gpu tests rc=$?"
step "device Allreduce: llrdma vs the user-level staging baseline"
for n in ${DEV_RANKS:-2 4 8}; do
  max=64M; [ "$n" = 2 ] && max=256M
  for mode in staging llrdma; do
    extra=(); [ $mode = staging ] && extra=(--staging-baseline)
    timeout 120 mpirun --oversubscribe --bind-to none -np "$n" llrdma-bench allreduce --device \
      "${extra[@]}" --min 8 --max $max --warmup 5 --iters 50 --csv "$R/dev-np$n-$mode.csv" \
      > "$R/dev-np$n-$mode.txt" 2>&1; echo "np $n $mode rc=$?"
  done
done
if [ "${NCCL:-1}" = 1 ]; then
  step "NCCL (torch.distributed), one rank per GPU"
  timeout 120 torchrun --nproc_per_node "$(nvidia-smi -L | grep -c '^GPU')" \
    "$here/nccl-allreduce.py" > "$R/nccl-np2.csv" 2> "$R/nccl.err"; echo "nccl rc=$?"
fi
step "host Allreduce: llrdma vs tuned, han, basic"
for n in ${HOST_RANKS:-4 8 16}; do
  timeout 150 llrdma-bench allreduce-compare --np "$n" --colls llrdma,tuned,han,basic \
    --mpirun-args "--bind-to core" --csv "$R/host-np$n.csv" -- --max 16M --iters 100 \
    > "$R/host-np$n.txt" 2>&1; echo "np $n rc=$?"
done
step "done"
tar czf "$OUT/res.tar.gz" -C "$OUT" res

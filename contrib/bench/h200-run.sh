#!/usr/bin/env bash
# Benchmark and GPU-test run on the H200 machine (Ubuntu 24.04, Open MPI 4.1.6,
# 16 cores, one GPU), from a `make dist` tarball.  Writes CSVs and logs to $OUT.
# The steps behind the dated H200 tables in docs/benchmarks.md (there they ran as
# separate device calls).  $OUT keeps at most 8 files on the device tool: tar it.
#   tar in the working tree root, then:  bash contrib/bench/h200-run.sh llrdma-*.tar.gz
set -u
tarball=$1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
export NCCL_NVLS_ENABLE=0
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
work=/tmp/llrdma-h200
rm -rf "$work" && mkdir -p "$work" && tar -xzf "$tarball" -C "$work" && cd "$work"/llrdma-*
t0=$SECONDS
{ ./configure --prefix="$work/inst" --with-cuda=/usr/local/cuda && make -j16 && make install; } \
  > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"
export PATH="$work/inst/bin:$PATH" LD_LIBRARY_PATH="$work/inst/lib"
export OMPI_MCA_mca_base_component_path="$work/inst/lib/openmpi:SYS_DEFAULT"
{ uname -a; nvidia-smi --query-gpu=name,driver_version --format=csv; mpirun --version | head -1;
  nproc; lscpu | grep 'Model name'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

step() { echo "=== $* ($((SECONDS - t0)) s)"; }
step "GPU tests"
if [ -x tests/gpu/run-gpu-tests.sh ] || [ -f tests/gpu/run-gpu-tests.sh ]; then
  timeout 240 bash tests/gpu/run-gpu-tests.sh > "$OUT/gpu-tests.log" 2>&1; echo "gpu tests rc=$?"
  tail -15 "$OUT/gpu-tests.log"
fi
step "host Allreduce: llrdma vs tuned, han, basic"
for n in ${HOST_RANKS:-4 8 16}; do
  timeout 200 llrdma-bench allreduce-compare --np "$n" --colls llrdma,tuned,han,basic \
    --mpirun-args "--bind-to core" --csv "$OUT/host-np$n.csv" -- --max 16M --iters 100 \
    > "$OUT/host-np$n.txt" 2>&1; echo "np $n rc=$?"
  grep -A40 "^Allreduce latency" "$OUT/host-np$n.txt" | head -32
done
step "device Allreduce: llrdma vs staging baseline"
for n in ${DEV_RANKS:-2 4 8}; do
  for mode in llrdma staging; do
    extra=(); [ $mode = staging ] && extra=(--staging-baseline)
    timeout 150 mpirun --oversubscribe -np "$n" llrdma-bench allreduce --device "${extra[@]}" \
      --min 8 --max 64M --warmup 5 --iters 50 \
      --csv "$OUT/dev-np$n-$mode.csv" > "$OUT/dev-np$n-$mode.txt" 2>&1; echo "np $n $mode rc=$?"
  done
done
step done

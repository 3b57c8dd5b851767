#!/usr/bin/env bash
# allreduce --verify on GPU buffers (issue 26) on an H200 device machine, from a
# `make dist` tarball: --device plain, --staging-baseline, --paired and float
# max must end "all results correct" with exit 0; the test hooks (one damaged
# element, also on the --paired duplicate; one stale input) must give exit 1
# and the mismatch line.  Logs under $OUT.  Last run: docs/bench.md.
#   bash contrib/bench/h200-verify-run.sh llrdma-*.tar.gz
set -u
tarball=$(readlink -f "$1")
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
grep -q single_copy /etc/openmpi/openmpi-mca-params.conf 2>/dev/null ||
  printf 'btl_vader_single_copy_mechanism = none\n' >> /etc/openmpi/openmpi-mca-params.conf
# shellcheck source=contrib/bench/h200-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/h200-lib.sh"
mapfile -t json_args < <(json_configure_args) # nlohmann-json: see h200-lib.sh
work=/tmp/llrdma-v; rm -rf "$work"; mkdir -p "$work"; tar -xzf "$tarball" -C "$work"; cd "$work"/llrdma-* || exit 1
export PATH=/usr/local/cuda/bin:$PATH
{ ./configure --prefix="$work/inst" --with-cuda=/usr/local/cuda "${json_args[@]}" && make -j"$(nproc)" && make install; } > "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "=== built ($SECONDS s)"
export PATH="$work/inst/bin:$PATH" LD_LIBRARY_PATH="$work/inst/lib"
export OMPI_MCA_mca_base_component_path="$work/inst/lib/openmpi:SYS_DEFAULT"
M=(--oversubscribe --bind-to none -x LLRDMA_CUDA_LIB="$PWD/libllrdma_cuda.so")
r() { local name=$1; shift; timeout 300 mpirun -np 2 "${M[@]}" "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$?"; grep -E "verify|served by|WARNING" "$OUT/$name.log" | cut -c1-330; }
B=(llrdma-bench allreduce --device --sizes 8,4K,1M,16M --warmup 2 --iters 20 --verify)
r dev "${B[@]}"
r dev-staging "${B[@]}" --staging-baseline
r dev-paired "${B[@]}" --paired
r dev-float-max "${B[@]}" --dtype float --op max
r dev-corrupt -x LLRDMA_BENCH_TEST_CORRUPT=1:1048576:9:100 "${B[@]}"
r dev-paired-corrupt -x LLRDMA_BENCH_TEST_CORRUPT=0:4096:3:7:prev "${B[@]}" --paired
r dev-stale -x LLRDMA_BENCH_TEST_STALE=0:16777216:4 "${B[@]}" --staging-baseline
r dev-noverify llrdma-bench allreduce --device --sizes 8,4K,1M,16M --warmup 2 --iters 20
grep -E "^ +[0-9]+ (B|KB|MB) " "$OUT/dev.log" "$OUT/dev-noverify.log"

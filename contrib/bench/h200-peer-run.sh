#!/usr/bin/env bash
# The GPU peer path (issue 16) on an H200 device machine, from a `make dist`
# tarball: build, the GPU suite, the peer path forced on ranks that share a
# GPU (real CUDA IPC handles, events and kernels even on one GPU), compute-
# sanitizer memcheck and racecheck on it, and the device benchmark: peer path
# vs arena path vs user staging (and NCCL through torch when there are 2 GPUs,
# one rank each).  Logs and CSVs under $OUT.
#   [LLRDMA_RDMACM_DEBS=DIR] bash contrib/bench/h200-peer-run.sh llrdma-*.tar.gz
# (DIR: librdmacm .debs, contrib/bench/h200-lib.sh; without them btl/llrdma
# is not built and the suite skips its two BTL checks, saying why; DIR may
# also hold nlohmann-json3-dev's .deb, used when the system lacks the header)
set -u
tarball=$(readlink -f "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 NCCL_NVLS_ENABLE=0
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
grep -q single_copy /etc/openmpi/openmpi-mca-params.conf 2>/dev/null ||
  printf 'btl_vader_single_copy_mechanism = none\n' >> /etc/openmpi/openmpi-mca-params.conf
# shellcheck source=contrib/bench/h200-lib.sh
. "$here/h200-lib.sh"
add_rdmacm_debs
mapfile -t json_args < <(json_configure_args)
mapfile -t progs < <(gpu_test_programs)
work=/tmp/llrdma-peer; rm -rf "$work"; mkdir -p "$work"; tar -xzf "$tarball" -C "$work"; cd "$work"/llrdma-* || exit 1
export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
step() { echo "=== $* ($((SECONDS - t0)) s)"; }
{ ./configure --prefix="$work/inst" --with-cuda=/usr/local/cuda "${json_args[@]}" && make -j"$(nproc)" &&
  make install && make -j"$(nproc)" "${progs[@]}"; } > "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
step built
export PATH="$work/inst/bin:$PATH" LD_LIBRARY_PATH="$work/inst/lib"
export OMPI_MCA_mca_base_component_path="$work/inst/lib/openmpi:SYS_DEFAULT"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
{ date -u; uname -a; nvidia-smi --query-gpu=name,driver_version --format=csv; nvidia-smi topo -m
  mpirun --version | head -1; nproc; uptime
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} > "$OUT/machine.txt" 2>&1
T=tests/gpu/t_allreduce_gpu
M=(--oversubscribe --bind-to none -x LLRDMA_CUDA_LIB="$PWD/libllrdma_cuda.so" --mca coll_llrdma_verbose 10)
peer() { # peer NAME TIMEOUT ARGS...: the peer path forced (ranks may share a GPU)
  local name=$1 to=$2; shift 2
  timeout "$to" mpirun -np 2 "${M[@]}" --mca coll_llrdma_gpu_stage_max 0 --mca coll_llrdma_gpu_peer force --mca coll_llrdma_gpu_peer_min 0 "$@" \
    > "$OUT/$name.log" 2>&1; echo "$name rc=$? PASS=$(grep -c 'rank .: PASS' "$OUT/$name.log") peer-calls=$(grep -c 'GPU peer path (CUDA IPC)' "$OUT/$name.log") fallbacks=$(grep -c 'peer path (' "$OUT/$name.log")"
}
step "peer path, 2 ranks, full matrix"
peer peer-matrix 150 $T
step "compute-sanitizer memcheck / racecheck on the peer path"
peer peer-memcheck 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 $T --quick
grep "ERROR SUMMARY" "$OUT/peer-memcheck.log"
peer peer-racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick
grep "RACECHECK SUMMARY\|ERROR SUMMARY" "$OUT/peer-racecheck.log"
step "device benchmark, 2 ranks"
B=(llrdma-bench allreduce --device --min 8 --max 256M --warmup 5 --iters 30)
for mode in peer arena staging; do
  case $mode in
    peer) x=(--mca coll_llrdma_gpu_peer force --mca coll_llrdma_gpu_peer_min 0 --mca coll_llrdma_gpu_stage_max 0) ;;
    arena) x=(--mca coll_llrdma_gpu_peer off) ;;
    staging) x=(--mca coll_llrdma_gpu_peer off); B2=(--staging-baseline) ;;
  esac
  timeout 90 mpirun -np 2 --oversubscribe --bind-to none "${x[@]}" "${B[@]}" ${B2[@]+"${B2[@]}"} \
    --csv "$OUT/bench-$mode.csv" > "$OUT/bench-$mode.txt" 2>&1; echo "bench $mode rc=$?"
done
if [ "$ngpu" -ge 2 ]; then
  step "NCCL"; timeout 90 torchrun --nproc_per_node 2 "$here/nccl-allreduce.py" > "$OUT/nccl.csv" 2> "$OUT/nccl.err"
fi
step "GPU suite (regression, peer path auto)"
mkdir -p "$OUT/gl"; LLRDMA_GPU_LOGS="$OUT/gl" LLRDMA_TEST_TIMEOUT=100 timeout 170 tests/gpu/run-gpu-tests.sh > "$OUT/gpu-tests.txt" 2>&1
echo "gpu suite rc=$?"; grep -c "^ok" "$OUT/gpu-tests.txt"; grep "^not ok" "$OUT/gpu-tests.txt" | head
step "done"
tar czf "$OUT/logs.tar.gz" -C "$OUT" gl peer-matrix.log peer-memcheck.log peer-racecheck.log machine.txt build.log gpu-tests.txt 2>/dev/null
rm -rf "$OUT/gl" "$OUT"/peer-*.log "$OUT/machine.txt" "$OUT/build.log" "$OUT"/bench-*.txt
python3 - "$OUT" <<'PY'
import csv, sys, os
o = sys.argv[1]
rows = {}
for mode in ("peer", "arena", "staging"):
    p = os.path.join(o, "bench-%s.csv" % mode)
    if not os.path.exists(p): continue
    for r in csv.DictReader(open(p)):
        k = int(r.get("bytes") or r.get("size") or 0)
        rows.setdefault(k, {})[mode] = r.get("p50_us") or r.get("p50") or "?"
print("bytes peer arena staging")
for k in sorted(rows): print(k, *(rows[k].get(m, "-") for m in ("peer", "arena", "staging")))
PY

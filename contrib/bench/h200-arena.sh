#!/usr/bin/env bash
# Issue 26's one-node host Allreduce on a device machine, two llrdma builds in
# one call (the machine's own noise moved whole runs by up to 2x before, so
# the builds are compared only within a call, alternated):
#  1. builds A and B from `make dist` tarballs, both --with-cuda (host calls run
#     the GPU-capable code, as on a GPU node);
#  2. RUNS alternated rounds per rank count of `llrdma-bench allreduce-compare
#     --colls llrdma,tuned` for A then B (same buffers every call, cache-warm)
#     and of contrib/bench/ar-avg.c (IMB/OSU-style mean over a timed loop) for
#     A, B and tuned;
#  3. B's phase times per size (coll_llrdma_verbose 5: copy in, waits, fold,
#     copy out, per round, each rank);
#  4. B with --verify against tuned and han (every call checked);
#  5. the GPU suite (tests/gpu/run-gpu-tests.sh) on B;
#  6. the CMA probe (contrib/bench/cma-probe.c) and, where CMA works, tuned over
#     vader with single copy by CMA.
# Each step checks the time left (the device tool allows 10 minutes a
# command).  Everything under $OUT/ar, packed into $OUT/ar.tgz; the tables
# are printed last.
#   bash contrib/bench/h200-arena.sh A.tar.gz B.tar.gz
# HOST_RANKS (default "8 16"), RUNS (2), SIZES (64,4K,64K,256K,1M,4M),
# BUDGET seconds for the whole script (560); GPU_SUITE=0 skips step 5; A_ENV, B_ENV: NAME=VALUE words
# exported for that side only (one tarball twice, a knob on one side:
# B_ENV=OMPI_MCA_coll_llrdma_shm_lines_max=0; the CMA build of f1a0c65 was
# measured with B_ENV=OMPI_MCA_coll_llrdma_shm_single_copy_min=64K).
set -u
a_tar=$(readlink -f "${1:?tarball A}")
b_tar=$(readlink -f "${2:?tarball B}")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-/tmp/out}
R=$OUT/ar
mkdir -p "$R"
budget=${BUDGET:-560}
sizes=${SIZES:-64,4K,64K,256K,1M,4M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
export NCCL_NVLS_ENABLE=0
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
# shellcheck source=contrib/bench/h200-lib.sh
. "$here/h200-lib.sh"
add_rdmacm_debs
mapfile -t json_args < <(json_configure_args)
mapfile -t progs < <(gpu_test_programs)
export PATH=/usr/local/cuda/bin:$PATH
path0=$PATH
left() { [ $((budget - SECONDS)) -gt "$1" ]; }
step() { echo "=== $* ($SECONDS s)"; }

{ date -u; nproc; lscpu | grep -E 'Model name|Thread|L2|L3|NUMA node'; mpirun --version | head -1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  sed 's/^/yama ptrace_scope /' /proc/sys/kernel/yama/ptrace_scope 2>/dev/null
  grep -E '^btl_vader' /etc/openmpi/openmpi-mca-params.conf; uptime
  echo "A_ENV=${A_ENV:-} B_ENV=${B_ENV:-}"; } > "$R/machine.txt" 2>&1

build() { # NAME TARBALL [make targets]
  local w=/tmp/ab/$1 tar=$2
  shift 2
  rm -rf "$w" && mkdir -p "$w" && tar -xzf "$tar" -C "$w" && cd "$w"/llrdma-* &&
    ./configure --prefix="$w/inst" --with-cuda=/usr/local/cuda "${json_args[@]}" &&
    make -j8 && make install && { [ $# -eq 0 ] || make -j8 "$@"; }
} > /dev/null 2> "$R/build-$1.err"
step "build A and B"
build A "$a_tar" & pa=$!
build B "$b_tar" "${progs[@]}" & pb=$!
wait $pa; ra=$?; wait $pb; rb=$?
step "built: A rc=$ra B rc=$rb"
if [ $ra != 0 ] || [ $rb != 0 ]; then tail -20 "$R"/build-*.err; exit 1; fi
mpicc -O2 -o /tmp/ab/ar-avg "$here/ar-avg.c" && cc -O2 -o /tmp/ab/cma-probe "$here/cma-probe.c" || exit 1

use() { # A or B: that build's components, libraries and tools, and its A_ENV / B_ENV
  local p=/tmp/ab/$1/inst v
  export PATH="$p/bin:$path0" LD_LIBRARY_PATH="$p/lib"
  export OMPI_MCA_mca_base_component_path="$p/lib/openmpi:SYS_DEFAULT"
  for v in ${A_ENV:-} ${B_ENV:-}; do unset "${v%%=*}"; done
  # shellcheck disable=SC2086 # NAME=VALUE words
  if [ "$1" = A ]; then set -- ${A_ENV:-}; else set -- ${B_ENV:-}; fi
  for v in "$@"; do export "${v?}"; done
}
M=(--bind-to core)
avg() { # LABEL NP [mpirun args]: ar-avg once
  local label=$1 np=$2
  shift 2
  timeout 120 mpirun -np "$np" "${M[@]}" "$@" /tmp/ab/ar-avg --sizes "$sizes" \
    > "$R/avg-$label.txt" 2>&1 || echo "ar-avg $label rc=$?"
}
for np in ${HOST_RANKS:-8 16}; do
  for k in $(seq "${RUNS:-2}"); do
    left 200 || break
    step "np $np round $k"
    for side in A B; do
      use $side
      timeout 150 llrdma-bench allreduce-compare --np "$np" --colls llrdma,tuned \
        --mpirun-args "${M[*]}" --csv "$R/cmp-$np-$side-$k.csv" -- --sizes "$sizes" --iters 200 \
        > "$R/cmp-$np-$side-$k.txt" 2>&1 || echo "compare np $np $side rc=$?"
      avg "$np-$side-$k" "$np"
    done
    avg "$np-tuned-$k" "$np" --mca coll ^llrdma
  done
done
use B
for np in ${HOST_RANKS:-8 16}; do
  for s in 256K 1M 4M; do
    left 170 || break
    timeout 60 mpirun -np "$np" "${M[@]}" --mca coll_llrdma_verbose 5 llrdma-bench allreduce \
      --sizes "$s" --iters 200 2>&1 | grep -E "us per round" | sed "s/^/np $np $s: /" >> "$R/phases.txt"
  done
done
step "phases done"
for np in ${HOST_RANKS:-8 16}; do
  left 160 || break
  timeout 150 llrdma-bench allreduce-compare --np "$np" --colls llrdma,tuned,han \
    --mpirun-args "${M[*]}" --csv "$R/verify-$np.csv" -- --sizes "$sizes" --iters 200 --verify \
    > "$R/verify-$np.txt" 2>&1 || echo "verify np $np rc=$?"
done
step "verify runs done"
if [ "${GPU_SUITE:-1}" != 0 ] && left 140; then
  (cd /tmp/ab/B/llrdma-* && LLRDMA_GPU_LOGS="$R/gl" LLRDMA_TEST_TIMEOUT=60 \
    timeout $((budget - SECONDS - 20)) bash tests/gpu/run-gpu-tests.sh) > "$R/gpu-tests.txt" 2>&1
  echo "gpu suite rc=$? ok=$(grep -c '^ok' "$R/gpu-tests.txt") not-ok=$(grep -c '^not ok' "$R/gpu-tests.txt")"
  grep -A8 '^not ok' "$R/gpu-tests.txt" | head -30
fi
/tmp/ab/cma-probe 1 > "$R/cma.txt" 2>&1; /tmp/ab/cma-probe 64 >> "$R/cma.txt" 2>&1 && cma=1 || cma=0
cat "$R/cma.txt"
if [ "$cma" = 1 ] && left 30; then
  for np in ${HOST_RANKS:-8 16}; do
    avg "$np-tuned-cma" "$np" --mca coll ^llrdma --mca btl_vader_single_copy_mechanism cma
  done
fi
tar czf "$OUT/ar.tgz" -C "$OUT" ar
step "done"
python3 - "$R" <<'PY'
import csv, glob, os, re, sys
R = sys.argv[1]
def p50(path):
    out = {}
    if os.path.exists(path):
        for row in csv.DictReader(open(path)):
            out[(row["coll"], int(row["size"]))] = float(row["p50_us"])
    return out
def avg(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) == 5 and f[0].isdigit():
                out[int(f[0])] = float(f[1])
    return out
print("| ranks | size | round | A P50 | B P50 | tuned (A's / B's run) | A/tuned | B/tuned | avg A | avg B | avg tuned | A/t | B/t |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for f in sorted(glob.glob(f"{R}/cmp-*-A-*.csv"), key=lambda s: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s)]):
    m = re.search(r"cmp-(\d+)-A-(\d+)\.csv", f); np, k = m.group(1), m.group(2)
    A, B = p50(f), p50(f.replace("-A-", "-B-"))
    vA, vB, vT = (avg(f"{R}/avg-{np}-{s}-{k}.txt") for s in ("A", "B", "tuned"))
    for size in sorted({s for (_, s) in A}):
        x, y, tx, ty = A.get(("llrdma", size)), B.get(("llrdma", size)), A.get(("tuned", size)), B.get(("tuned", size))
        if None in (x, y, tx, ty):
            continue
        a, b, t = vA.get(size), vB.get(size), vT.get(size)
        ex = f"{a:.2f} | {b:.2f} | {t:.2f} | {a/t:.2f} | {b/t:.2f}" if None not in (a, b, t) else "- | - | - | - | -"
        print(f"| {np} | {size} | {k} | {x:.2f} | {y:.2f} | {tx:.2f} / {ty:.2f} | {x/tx:.2f} | {y/ty:.2f} | {ex} |")
for f in sorted(glob.glob(f"{R}/avg-*-tuned-cma.txt")):
    print(os.path.basename(f), "".join(open(f).readlines()[2:-1]))
PY
grep -h "verify\|llrdma/best" "$R"/verify-*.txt | head -8

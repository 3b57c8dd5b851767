#!/usr/bin/env bash
# Two builds of llrdma against each other and against tuned, in one session:
# RUNS alternated rounds of `llrdma-bench allreduce-compare --colls
# llrdma,tuned` per rank count, first with build A's components, then with
# B's, back to back on the same buffers (cache-warm), then one --verify run
# per build (every timed call checked).  Each round also times A, B and
# tuned with contrib/bench/ar-avg.c (the mean over a timed loop of calls on
# the same buffers, as IMB does: a second timer of another design).  Prints
# one table: P50 of A and B, tuned's in each run, both ratios, and the
# loop means with their ratios.
#   contrib/bench/build-ab.sh A_DIR B_DIR [RUNS] [RANKS...]
# A_DIR, B_DIR: a build directory (its .libs) or an install prefix
# (lib/openmpi).  Sizes: BUILD_AB_SIZES (default 8,64,512,1K,4K,64K);
# extra mpirun arguments: BUILD_AB_MPIRUN (default "--bind-to core");
# BUILD_AB_TIMER=osu: ar-avg times as osu_allreduce does instead (a clock
# read around each call, a barrier after each).
set -u
a=$(readlink -f "${1:?build A: build directory or install prefix}")
b=$(readlink -f "${2:?build B: build directory or install prefix}")
runs=${3:-3}
shift 3 2>/dev/null || shift $#
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2)
export OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
mpi=${BUILD_AB_MPIRUN:---bind-to core}
S=(--sizes "${BUILD_AB_SIZES:-8,64,512,1K,4K,64K}" --iters 20000 --warmup 2000)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mpicc -O2 -o "$tmp/ar-avg" "$here/ar-avg.c" || exit 1
T=(--timer "${BUILD_AB_TIMER:-loop}")
# use DIR: components, libraries and llrdma-bench of that build.
use() {
  if [ -d "$1/.libs" ]; then
    export OMPI_MCA_mca_base_component_path="$1/.libs:SYS_DEFAULT" LD_LIBRARY_PATH="$1/.libs"
    bench=$1/llrdma-bench
  else
    export OMPI_MCA_mca_base_component_path="$1/lib/openmpi:SYS_DEFAULT" LD_LIBRARY_PATH="$1/lib"
    bench=$1/bin/llrdma-bench
  fi
}
echo "# $(date -u) $(nproc) CPUs, $(mpirun --version | head -1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# A: $a"
echo "# B: $b"
for np in "${ranks[@]}"; do
  for k in $(seq "$runs"); do
    for side in A B; do
      if [ $side = A ]; then use "$a"; else use "$b"; fi
      timeout 600 "$bench" allreduce-compare --np "$np" --colls llrdma,tuned \
        --mpirun-args "$mpi --oversubscribe" --csv "$tmp/$np-$side-$k.csv" -- "${S[@]}" \
        > "$tmp/$np-$side-$k.log" 2>&1 || { echo "run failed: np $np build $side"; tail -5 "$tmp/$np-$side-$k.log"; }
      # shellcheck disable=SC2086 # mpi: mpirun words
      timeout 600 mpirun -np "$np" $mpi --oversubscribe "$tmp/ar-avg" "${S[@]:0:2}" "${T[@]}" \
        > "$tmp/avg-$np-$side-$k.txt" 2>&1 || echo "ar-avg failed: np $np build $side"
    done
    # shellcheck disable=SC2086 # mpi: mpirun words
    timeout 600 mpirun -np "$np" $mpi --oversubscribe --mca coll tuned,basic,libnbc,self \
      "$tmp/ar-avg" "${S[@]:0:2}" "${T[@]}" > "$tmp/avg-$np-tuned-$k.txt" 2>&1 || echo "ar-avg failed: tuned"
  done
  for side in A B; do
    if [ $side = A ]; then use "$a"; else use "$b"; fi
    # shellcheck disable=SC2086 # mpi: mpirun words
    timeout 600 mpirun -np "$np" $mpi --oversubscribe "$bench" allreduce "${S[@]:0:2}" \
      --iters 200 --warmup 20 --verify 2>&1 | grep -E "^# --verify" | sed "s/^/# np $np, build $side: /"
  done
done
python3 - "$tmp" "$runs" "${ranks[@]}" <<'PY'
import csv, sys, os
tmp, runs, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| ranks | size | run | A us | B us | tuned us (A's run / B's) | A/tuned | B/tuned "
      "| mean A | mean B | mean tuned | A/t | B/t |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
def means(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) == 5 and f[0].isdigit():
                out[int(f[0])] = float(f[1])
    return out
def load(path):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for row in csv.DictReader(f):
            out[(row["coll"], int(row["size"]))] = float(row["p50_us"])
    return out
for np in ranks:
    for k in range(1, runs + 1):
        A, B = load(f"{tmp}/{np}-A-{k}.csv"), load(f"{tmp}/{np}-B-{k}.csv")
        mA, mB, mT = (means(f"{tmp}/avg-{np}-{s}-{k}.txt") for s in ("A", "B", "tuned"))
        for size in sorted({s for (_, s) in A}):
            x, y = A.get(("llrdma", size)), B.get(("llrdma", size))
            tx, ty = A.get(("tuned", size)), B.get(("tuned", size))
            if None in (x, y, tx, ty):
                continue
            a, b, t = mA.get(size), mB.get(size), mT.get(size)
            m = (f"{a:.3f} | {b:.3f} | {t:.3f} | {a / t:.2f} | {b / t:.2f}"
                 if None not in (a, b, t) else "- | - | - | - | -")
            print(f"| {np} | {size} B | {k} | {x:.3f} | {y:.3f} | {tx:.3f} / {ty:.3f} | "
                  f"{x / tx:.2f} | {y / ty:.2f} | {m} |")
PY

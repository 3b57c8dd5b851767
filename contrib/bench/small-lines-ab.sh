#!/usr/bin/env bash
# Small host Allreduces through the arena with the line path on and off
# (coll_llrdma_shm_lines_max default vs 0), each against tuned in the same
# run: RUNS alternated rounds of `llrdma-bench allreduce-compare --colls
# llrdma,tuned` per rank count, back to back on the same buffers (cache-warm),
# then one --verify run per setting.  Prints one table: P50 of llrdma with and
# without lines, tuned's, and both ratios.
#   contrib/bench/small-lines-ab.sh DIR [RUNS] [RANKS...]
# DIR: a build directory (its .libs) or an install prefix (lib/openmpi).
# Extra mpirun arguments: SMALL_AB_MPIRUN (default "--bind-to core").
# SMALL_AB_SIZES (default 8,64,512,1K); SMALL_AB_ON / SMALL_AB_OFF: the
# coll_llrdma_shm_lines_max of the "lines" and "no lines" columns (default:
# the component's default, and 0).
set -u
dir=$(readlink -f "${1:?build directory or install prefix}")
runs=${2:-3}
shift 2 2>/dev/null || shift $#
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2)
if [ -d "$dir/.libs" ]; then
  export OMPI_MCA_mca_base_component_path="$dir/.libs:SYS_DEFAULT" LD_LIBRARY_PATH="$dir/.libs"
  bench=$dir/llrdma-bench
else
  export OMPI_MCA_mca_base_component_path="$dir/lib/openmpi:SYS_DEFAULT" LD_LIBRARY_PATH="$dir/lib"
  bench=$dir/bin/llrdma-bench
fi
export OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
mpi=${SMALL_AB_MPIRUN:---bind-to core}
S=(--sizes "${SMALL_AB_SIZES:-8,64,512,1K}" --iters 20000 --warmup 2000)
# lines_args MODE: the mpirun words that set MODE's lines_max.
lines_args() {
  if [ "$1" = off ]; then
    echo "--mca coll_llrdma_shm_lines_max ${SMALL_AB_OFF:-0}"
  elif [ -n "${SMALL_AB_ON:-}" ]; then
    echo "--mca coll_llrdma_shm_lines_max $SMALL_AB_ON"
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u) $(nproc) CPUs, $(mpirun --version | head -1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
# one NP MODE K: a compare run; its CSV rows (coll,size,p50) go to $tmp/NP-MODE-K.
one() {
  local np=$1 mode=$2 k=$3 extra
  extra=$(lines_args "$mode")
  timeout 600 "$bench" allreduce-compare --np "$np" --colls llrdma,tuned \
    --mpirun-args "$mpi --oversubscribe $extra" --csv "$tmp/$np-$mode-$k.csv" -- "${S[@]}" \
    > "$tmp/$np-$mode-$k.log" 2>&1 || { echo "run failed: np $np lines $mode"; tail -5 "$tmp/$np-$mode-$k.log"; }
}
for np in "${ranks[@]}"; do
  for k in $(seq "$runs"); do
    one "$np" on "$k"
    one "$np" off "$k"
  done
  for mode in on off; do
    extra=$(lines_args "$mode")
    # shellcheck disable=SC2086 # extra: mpirun words
    timeout 600 mpirun -np "$np" $mpi --oversubscribe --mca pml ob1 $extra "$bench" allreduce \
      "${S[@]:0:2}" --iters 200 --warmup 20 --verify 2>&1 | grep -E "^# --verify" |
      sed "s/^/# np $np, lines $mode: /"
  done
done
# The table: per NP, size and run, the P50s (the CSV's coll, size, p50_us columns).
python3 - "$tmp" "$runs" "${ranks[@]}" <<'PY'
import csv, sys, os
tmp, runs, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| ranks | size | run | llrdma lines us | llrdma no lines us | tuned us (both runs) | lines/tuned | no lines/tuned |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
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
        on, off = load(f"{tmp}/{np}-on-{k}.csv"), load(f"{tmp}/{np}-off-{k}.csv")
        for size in sorted({s for (_, s) in on}):
            a, b = on.get(("llrdma", size)), off.get(("llrdma", size))
            ta, tb = on.get(("tuned", size)), off.get(("tuned", size))
            if None in (a, b, ta, tb):
                continue
            print(f"| {np} | {size} B | {k} | {a:.3f} | {b:.3f} | {ta:.3f} / {tb:.3f} | "
                  f"{a / ta:.2f} | {b / tb:.2f} |")
PY

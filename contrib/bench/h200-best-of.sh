#!/usr/bin/env bash
# Issue 26's host Allreduce on a device machine against the best of Open
# MPI's own (coll/tuned and coll/han, each measured in the same round), with
# both of contrib/bench/ar-avg.c's timers: `osu` (a clock read around each
# call, a barrier after each, as osu_allreduce) and `loop` (one clock read
# around the timed loop, as IMB).  The same two buffers every call (cache
# warm).  Ratios are llrdma / min(tuned, han) per size, round and timer.
# One build from a `make dist` tarball, --with-cuda (host calls run the
# GPU-capable code, as on a GPU node).  Optional steps first:
#   GPU_SUITE=1   tests/gpu/run-gpu-tests.sh on the build (logs: $OUT/gpu.tgz)
#   DEV_SHARE=1   8 ranks, device buffers (llrdma-bench allreduce --device),
#                 the shared fold on (defaults) against coll_llrdma_shm_share_min 0
# Then ROUNDS (2) rounds of: per rank count in RANKS ("8 16"), per timer in
# TIMERS ("osu loop"): tuned, han and each llrdma configuration of CONFIGS,
# ';'-separated NAME:MPIRUN-ARGS (default "llrdma:", the defaults), e.g.
#   CONFIGS="c2M:--mca coll_llrdma_shm_chunk_size 2M;c512K:--mca coll_llrdma_shm_chunk_size 512K"
# PHASES=1: each configuration's phase line (coll_llrdma_verbose 5) at
# PHASE_SIZE (4M) on the largest rank count.  SIZES (64,512,4K,32K,64K,256K,
# 1M,4M,8M); BUDGET seconds in all (560: the device tool's 10-minute command).
# Everything under $OUT/bo, packed into $OUT/bo.tgz and removed (the device
# tool brings back few files); the table is also printed.
#   LLRDMA_RDMACM_DEBS=... bash contrib/bench/h200-best-of.sh llrdma-X.tar.gz
set -u
tarball=$(readlink -f "${1:?make dist tarball}")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-/tmp/out}
R=$OUT/bo
rm -rf "$R" && mkdir -p "$R" || exit 1
budget=${BUDGET:-560}
sizes=${SIZES:-64,512,4K,32K,64K,256K,1M,4M,8M}
configs=${CONFIGS:-llrdma:}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
# shellcheck source=contrib/bench/h200-lib.sh
. "$here/h200-lib.sh"
add_rdmacm_debs > /dev/null
mapfile -t json_args < <(json_configure_args)
mapfile -t progs < <(gpu_test_programs)
export PATH=/usr/local/cuda/bin:$PATH
left() { [ $((budget - SECONDS)) -gt "$1" ]; }
pack() { tar czf "$OUT/bo.tgz" -C "$OUT" bo && rm -rf "$R"; }

w=/tmp/best-of
rm -rf "$w" && mkdir -p "$w" && tar -xzf "$tarball" -C "$w" && cd "$w"/llrdma-* || exit 1
{ ./configure --prefix="$w/inst" --with-cuda=/usr/local/cuda "${json_args[@]}" && make -j"$(nproc)" &&
  make install && { [ "${GPU_SUITE:-0}" = 0 ] || make -j"$(nproc)" "${progs[@]}"; }; } \
  > "$R/build.log" 2>&1 || { tail -30 "$R/build.log"; exit 1; }
echo "=== built ($SECONDS s)"
{ date -u; nproc; lscpu | grep -E 'Model name|Thread|L2|L3|NUMA node'; mpirun --version | head -1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  grep -E '^btl_vader' /etc/openmpi/openmpi-mca-params.conf; uptime
  echo "configs: $configs"; } > "$R/machine.txt" 2>&1

if [ "${GPU_SUITE:-0}" != 0 ]; then
  LLRDMA_GPU_LOGS="$R/gl" LLRDMA_TEST_TIMEOUT=90 bash tests/gpu/run-gpu-tests.sh > "$R/gpu-tests.txt" 2>&1
  echo "=== gpu suite rc=$? ok=$(grep -c '^ok' "$R/gpu-tests.txt")" \
    "not-ok=$(grep -c '^not ok' "$R/gpu-tests.txt") ($SECONDS s)"
  grep -A8 '^not ok' "$R/gpu-tests.txt" | head -30
fi
p=$w/inst
export PATH="$p/bin:$PATH" LD_LIBRARY_PATH="$p/lib"
export OMPI_MCA_mca_base_component_path="$p/lib/openmpi:SYS_DEFAULT"
mpicc -O2 -o "$w/ar-avg" "$here/ar-avg.c" || exit 1

if [ "${DEV_SHARE:-0}" != 0 ]; then
  for k in 1 2; do
    for e in default 0; do
      x=()
      [ $e = 0 ] && x=(--mca coll_llrdma_shm_share_min 0)
      timeout 60 mpirun -np 8 --bind-to core "${x[@]}" llrdma-bench allreduce --device \
        --sizes 64K,256K,1M,4M --iters 100 > "$R/dev8-$e-$k.txt" 2>&1 || echo "dev8 $e $k rc=$?"
    done
  done
  echo "=== device buffers done ($SECONDS s)"
fi

M=(--bind-to core)
for k in $(seq "${ROUNDS:-2}"); do
  for np in ${RANKS:-8 16}; do
    for t in ${TIMERS:-osu loop}; do
      left 40 || break 3
      for c in "tuned:--mca coll ^llrdma" "han:--mca coll ^llrdma --mca coll_han_priority 100"; do
        # shellcheck disable=SC2086 # mpirun words
        timeout 60 mpirun -np "$np" "${M[@]}" ${c#*:} "$w/ar-avg" --timer "$t" --sizes "$sizes" \
          > "$R/avg-$np-$t-${c%%:*}-$k.txt" 2>&1 || echo "${c%%:*} $np $t $k rc=$?"
      done
      IFS=';' read -r -a cl <<< "$configs"
      for c in "${cl[@]}"; do
        # shellcheck disable=SC2086 # mpirun words
        timeout 60 mpirun -np "$np" "${M[@]}" ${c#*:} "$w/ar-avg" --timer "$t" --sizes "$sizes" \
          > "$R/avg-$np-$t-${c%%:*}-$k.txt" 2>&1 || echo "${c%%:*} $np $t $k rc=$?"
      done
    done
  done
done
echo "=== timed ($SECONDS s)"
if [ "${PHASES:-0}" != 0 ]; then
  np=$(echo "${RANKS:-8 16}" | tr ' ' '\n' | sort -n | tail -1)
  IFS=';' read -r -a cl <<< "$configs"
  for c in "${cl[@]}"; do
    left 25 || break
    # shellcheck disable=SC2086 # mpirun words
    timeout 40 mpirun -np "$np" "${M[@]}" ${c#*:} --mca coll_llrdma_verbose 5 llrdma-bench allreduce \
      --sizes "${PHASE_SIZE:-4M}" --iters 50 2>&1 | grep -E "us per round" |
      sed "s/^/${c%%:*} np $np: /" >> "$R/phases.txt"
  done
fi
python3 - "$R" > "$R/table.txt" <<'PY'
import glob, os, re, sys
R = sys.argv[1]
d = {}
for f in glob.glob(f"{R}/avg-*.txt"):
    m = re.match(r"avg-(\d+)-(\w+)-(.+)-(\d+)\.txt", os.path.basename(f))
    for line in open(f):
        x = line.split()
        if len(x) == 5 and x[0].isdigit():
            d[(int(m[1]), m[2], m[3], int(m[4]), int(x[0]))] = float(x[1])
names = sorted({c for (_, _, c, _, _) in d} - {"tuned", "han"})
print("| ranks | timer | round | size | tuned | han | " + " | ".join(f"{n} | {n}/best" for n in names) + " |")
print("| --- " * (6 + 2 * len(names)) + "|")
for key in sorted({(n, t, k, s) for (n, t, _, k, s) in d}):
    n, t, k, s = key
    tu, ha = d.get((n, t, "tuned", k, s)), d.get((n, t, "han", k, s))
    if tu is None or ha is None:
        continue
    b = min(tu, ha)
    cells = [f"{d[(n, t, c, k, s)]:.2f} | {d[(n, t, c, k, s)] / b:.2f}" if (n, t, c, k, s) in d
             else "- | -" for c in names]
    print(f"| {n} | {t} | {k} | {s} | {tu:.2f} | {ha:.2f} | " + " | ".join(cells) + " |")
PY
cat "$R/table.txt"
[ ! -e "$R/phases.txt" ] || cat "$R/phases.txt"
for f in "$R"/dev8-*.txt; do
  [ -e "$f" ] && grep -E "^ *[0-9]+ " "$f" | sed "s/^/$(basename "$f" .txt): /"
done
[ ! -d "$R/gl" ] || { tar czf "$R/gl.tgz" -C "$R" gl && rm -rf "$R/gl"; }
pack
echo "=== done ($SECONDS s)"

#!/usr/bin/env bash
# coll/llrdma against han across two Soft-RoCE guests, paired call by call
# (issue 26: <= 0.9x han at 512 B-32 KB, at least three rounds per cell), in
# ONE cluster boot of `contrib/softroce-vm --nodes 2` (two TCG guests joined by
# a QEMU hub, rxe0 on each; docs/softroce.md).  Per round and size hint (0, 8K,
# 64K): 2 nodes x 2 ranks (--map-by node), pml ob1 + btl self,vader,llrdma,
# `llrdma-bench allreduce --paired --verify`: every iteration calls
# MPI_Allreduce on MPI_COMM_WORLD (coll/llrdma) and on a duplicate that
# coll/llrdma hands to the module below (han, at coll_han_priority 35), the
# order turning every iteration, every call of both checked (docs/bench.md).
# The hints turn order per round.  Prints, per hint and size, the paired
# median of each round (llrdma / han, call by call) and their median.
#
# Usage (as root, from a build tree after `make install` into $PREFIX):
#   contrib/bench/cluster-paired.sh                 # one cluster boot; results in $OUT
#   contrib/bench/cluster-paired.sh --summary [DIR] # only the table
# Environment: PREFIX (_build/inst), OUT (_build/cluster-paired; its parent is
# shared read-write with the guests), ROUNDS (3), HINTS (0 8K 64K), SIZES
# (512,1K,4K,8K,16K,32K), ITERS (100), VM_TIMEOUT (3600), EXTRA (more mpirun
# words for every run, e.g. "--mca coll_llrdma_allreduce_algorithm ring": it
# forces the inter-node step's algorithm).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
PREFIX=${PREFIX:-$top/_build/inst}
OUT=${OUT:-$top/_build/cluster-paired}
ROUNDS=${ROUNDS:-3}
HINTS=${HINTS:-0 8K 64K}
SIZES=${SIZES:-512,1K,4K,8K,16K,32K}
ITERS=${ITERS:-100}
EXTRA=${EXTRA:-}

guest() {
  local d=$1 r h hints
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  # As tests/cluster/env.sh: what reaches the other node, keepalives on mpirun's links.
  local C="--hostfile $SOFTROCE_VM_HOSTFILE -x PATH -x LD_LIBRARY_PATH --bind-to none
    --mca mpi_yield_when_idle 1 --mca oob_tcp_keepalive_time 5"
  # verbose 5 names the module below once per communicator (10 would print per call).
  local OB1="--mca pml ob1 --mca btl self,vader,llrdma --mca coll_han_priority 35
    --mca coll_llrdma_verbose 5"
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"; echo "nodes: $SOFTROCE_VM_NODES"
    cat "$SOFTROCE_VM_HOSTFILE"
    echo "mpirun: $(mpirun --version | head -1)"
    echo "ROUNDS=$ROUNDS HINTS=$HINTS SIZES=$SIZES ITERS=$ITERS EXTRA=$EXTRA"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"
  read -r -a hints <<<"$HINTS"
  for r in $(seq "$ROUNDS"); do
    # Rotate the hints so no hint always runs first in a boot.
    local k n=${#hints[@]}
    for ((k = 0; k < n; ++k)); do
      h=${hints[$(((k + r - 1) % n))]}
      echo "=== round $r hint $h ($SECONDS s)"
      # shellcheck disable=SC2086
      timeout 900 mpirun -np 4 $C $OB1 $EXTRA --map-by node --mca btl_llrdma_size_hint "$h" \
        "$PREFIX/bin/llrdma-bench" allreduce --paired --verify --sizes "$SIZES" \
        --iters "$ITERS" --warmup 20 --csv "$d/paired-$h-r$r.csv" > "$d/paired-$h-r$r.txt" 2>&1
      echo "rc=$?" | tee "$d/paired-$h-r$r.rc"
      cat "$d/paired-$h-r$r.txt"
    done
  done
  echo "=== done ($SECONDS s)"
}

summary() {
  python3 - "$1" <<'PYEOF'
import csv, glob, os, re, statistics as st, sys
d = sys.argv[1]
def sz(s):
    return f'{s >> 10} KB' if s >= 1024 and s % 1024 == 0 else f'{s} B'
t, runs, bad = {}, {}, []
for f in sorted(glob.glob(os.path.join(d, 'paired-*-r*.csv'))):
    h, r = re.search(r'paired-(\w+)-r(\d+)\.csv', f).groups()
    rc = open(f[:-4] + '.rc').read().strip()
    txt = open(f[:-4] + '.txt', errors='replace').read()
    ok = rc == 'rc=0' and 'all results correct' in txt
    if not ok:
        bad.append(f'{os.path.basename(f)} ({rc}, verify {"ok" if "all results correct" in txt else "not ok"})')
        continue
    runs.setdefault(h, 0)
    runs[h] += 1
    for row in csv.DictReader(l for l in open(f) if not l.startswith('#')):
        t.setdefault((h, int(row['size'])), []).append(float(row['ratio_paired']))
hints = [h for h in ('0', '8K', '64K') if h in runs]
sizes = sorted({s for (_, s) in t})
print('| size | ' + ' | '.join(f'hint {h}: median (rounds)' for h in hints) + ' |')
print('|---' * (len(hints) + 1) + '|')
for s in sizes:
    cells = []
    for h in hints:
        v = t.get((h, s), [])
        cells.append(f'{st.median(v):.2f} ({", ".join(f"{x:.2f}" for x in v)})' if v else '-')
    print(f'| {sz(s)} | ' + ' | '.join(cells) + ' |')
print(f'\nruns verified and counted per hint: {runs}')
if bad:
    print('not counted: ' + '; '.join(bad))
PYEOF
}

bench_note() { echo "prefix: $PREFIX"; }
# shellcheck source=contrib/bench/bench-lib.sh
. "$here/bench-lib.sh"
bench_main "$0" "$@"
export PREFIX ROUNDS HINTS SIZES ITERS EXTRA
"$here/../softroce-vm" --nodes 2 --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-3600}" -- \
  bash "$here/cluster-paired.sh" --guest "$OUT" 2>&1 | tee "$OUT/guest.log"
summary "$OUT" | tee "$OUT/summary.md"

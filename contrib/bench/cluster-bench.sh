#!/usr/bin/env bash
# Two-node benchmark (issue 13), in ONE cluster boot of `contrib/softroce-vm --nodes 2`
# (two QEMU TCG guests joined by a QEMU hub, rxe0 on each; docs/softroce.md).
# One round of all three parts takes about 40 min on the 2-core host (each Allreduce
# hint about 10 min: a 4 MB call across the guests takes seconds):
#   1. Allreduce, 2 nodes x 2 ranks (--map-by node), pml ob1 + btl self,vader,llrdma:
#      `llrdma-bench allreduce-compare --colls llrdma,tuned,han` (han at priority 100)
#      once per size hint 0, 8K, 64K (btl_llrdma_size_hint: the BTL and coll/llrdma
#      both follow it; tuned and han run over the same BTL profile), ROUNDS rounds,
#      the order of the three components turning per round.
#   2. Ping-pong across the nodes (1 rank per node): llrdma-bench pingpong at hints
#      0, 8K, 64K and over pml ucx (UCX on rxe0).
#   3. Bandwidth across the nodes: llrdma-bench bw at the same hints and over UCX.
# then prints the tables (python3).
#
# Usage (as root, from a build tree after `make install` into $PREFIX):
#   contrib/bench/cluster-bench.sh                 # one cluster boot; results in $OUT
#   contrib/bench/cluster-bench.sh --summary [DIR] # only the tables
# Environment: PREFIX (_build/inst), OUT (_build/cluster-bench; its parent is shared
# read-write with the guests), ROUNDS (1), AR_HINTS (0 8K 64K; empty: no Allreduce),
# PP_STACKS (0 8K 64K ucx: hints and UCX for ping-pong and bw), AR_SIZES (8,64,512,4K,32K,256K,1M,2M,4M),
# AR_ITERS (200), AR_BUDGET (32M), PP_SIZES (8,256,1K,4K,8K,16K,64K), PP_ITERS (500),
# BW_SIZES (64K,256K,1M,4M), UCX_TLS (rc_verbs,ud_verbs,self), VM_TIMEOUT (3600).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
PREFIX=${PREFIX:-$top/_build/inst}
OUT=${OUT:-$top/_build/cluster-bench}
ROUNDS=${ROUNDS:-1}
AR_SIZES=${AR_SIZES:-8,64,512,4K,32K,256K,1M,2M,4M}
AR_ITERS=${AR_ITERS:-200}
AR_BUDGET=${AR_BUDGET:-32M}
PP_SIZES=${PP_SIZES:-8,256,1K,4K,8K,16K,64K}
PP_ITERS=${PP_ITERS:-500}
BW_SIZES=${BW_SIZES:-64K,256K,1M,4M}
UCX_TLS=${UCX_TLS:-rc_verbs,ud_verbs,self}
HINTS="0 8K 64K"
AR_HINTS=${AR_HINTS-$HINTS}
PP_STACKS=${PP_STACKS:-$HINTS ucx}

guest() {
  local d=$1 r h
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  # As tests/cluster/env.sh: what reaches the other node, keepalives on mpirun's links.
  local C="--hostfile $SOFTROCE_VM_HOSTFILE -x PATH -x LD_LIBRARY_PATH --bind-to none
    --mca mpi_yield_when_idle 1 --mca oob_tcp_keepalive_time 5"
  local OB1="--mca pml ob1 --mca btl self,vader,llrdma"
  local UCX="--mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi,llrdma --mca osc ^ucx
    -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=$UCX_TLS -x UCX_UD_ETH_DGID_CHECK=n"
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"; echo "nodes: $SOFTROCE_VM_NODES"
    cat "$SOFTROCE_VM_HOSTFILE"
    echo "mpirun: $(mpirun --version | head -1)"
    echo "ucx: $(ucx_info -v 2>/dev/null | head -1)"
    echo "ROUNDS=$ROUNDS AR_SIZES=$AR_SIZES AR_ITERS=$AR_ITERS AR_BUDGET=$AR_BUDGET"
    echo "PP_SIZES=$PP_SIZES PP_ITERS=$PP_ITERS BW_SIZES=$BW_SIZES UCX_TLS=$UCX_TLS"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"
  local orders=(llrdma,tuned,han tuned,han,llrdma han,llrdma,tuned) colls
  for r in $(seq "$ROUNDS"); do
    # The components run one after another; the order turns per round, so none
    # always runs first (in one boot a cell's per-round llrdma / han at 8 B-32 KB
    # spanned as much as 0.66-1.90).
    colls=${orders[$(((r - 1) % 3))]}
    for h in $AR_HINTS; do
      echo "=== allreduce round $r hint $h, $colls ($SECONDS s)"
      # shellcheck disable=SC2086
      timeout 1200 "$PREFIX/bin/llrdma-bench" allreduce-compare --np 4 --colls "$colls" \
        --mpirun-args "$C $OB1 --map-by node --mca btl_llrdma_size_hint $h" \
        --csv "$d/ar-$h-r$r.csv" -- --sizes "$AR_SIZES" --iters "$AR_ITERS" \
        --budget "$AR_BUDGET" > "$d/ar-$h-r$r.txt" 2>&1
      echo "rc=$?"
      cat "$d/ar-$h-r$r.txt"
    done
  done
  for r in $(seq "$ROUNDS"); do
    for h in $PP_STACKS; do
      local stack="$OB1 --mca btl_llrdma_size_hint $h"
      [[ $h == ucx ]] && stack=$UCX
      echo "=== pingpong round $r $h ($SECONDS s)"
      # shellcheck disable=SC2086
      timeout 900 mpirun -np 2 $C --map-by node $stack "$PREFIX/bin/llrdma-bench" pingpong \
        --sizes "$PP_SIZES" --iters "$PP_ITERS" --csv "$d/pp-$h-r$r.csv" \
        > "$d/pp-$h-r$r.txt" 2>&1
      echo "rc=$?"
      echo "=== bw round $r $h ($SECONDS s)"
      # shellcheck disable=SC2086
      timeout 900 mpirun -np 2 $C --map-by node $stack "$PREFIX/bin/llrdma-bench" bw \
        --sizes "$BW_SIZES" --window 16 --window-bytes 8M --budget 16M --min-iters 1 \
        --csv "$d/bw-$h-r$r.csv" > "$d/bw-$h-r$r.txt" 2>&1
      echo "rc=$?"
    done
  done
  echo "=== done ($SECONDS s)"
}

summary() {
  python3 - "$1" <<'PYEOF'
import csv, glob, os, re, statistics as st, sys
d = sys.argv[1]
med = st.median
def rows(path):
    return list(csv.DictReader(l for l in open(path) if not l.startswith('#')))
def sz(s):
    return f'{s >> 20} MB' if s >= 1 << 20 and s % (1 << 20) == 0 else (
        f'{s >> 10} KB' if s >= 1024 and s % 1024 == 0 else f'{s} B')
# Allreduce: allreduce-compare CSVs carry a coll column.
ar = {}  # (hint, coll, size) -> [(p50, p99)] over rounds
for f in glob.glob(os.path.join(d, 'ar-*-r*.csv')):
    h = re.search(r'ar-(\w+)-r\d+\.csv', f).group(1)
    for r in rows(f):
        ar.setdefault((h, r['coll'], int(r['size'])), []).append((float(r['p50_us']), float(r['p99_us'])))
for h in ('0', '8K', '64K'):
    sizes = sorted({s for (hh, _, s) in ar if hh == h})
    if not sizes:
        continue
    print(f'\n### Allreduce, 2 nodes x 2 ranks, btl_llrdma_size_hint {h}: P50 / P99 (us), median over rounds')
    print('| size | llrdma | tuned | han | llrdma / best other (P50) |\n|---|---|---|---|---|')
    for s in sizes:
        cell, p50 = [], {}
        for c in ('llrdma', 'tuned', 'han'):
            v = ar.get((h, c, s))
            if v:
                p50[c] = med(x[0] for x in v)
                cell.append(f'{p50[c]:.0f} / {med(x[1] for x in v):.0f}')
            else:
                cell.append('-')
        others = [p50[c] for c in ('tuned', 'han') if c in p50]
        ratio = f'{p50["llrdma"] / min(others):.2f}' if 'llrdma' in p50 and others else '-'
        print(f'| {sz(s)} | ' + ' | '.join(cell) + f' | {ratio} |')
for kind, field, unit in (('pp', 'p50_us', 'round trip P50 (us)'), ('bw', 'bw_MBps', 'MB/s (10^6 B/s)')):
    t = {}
    for f in glob.glob(os.path.join(d, f'{kind}-*-r*.csv')):
        h = re.search(kind + r'-(\w+)-r\d+\.csv', f).group(1)
        for r in rows(f):
            t.setdefault((h, int(r['size'])), []).append(float(r[field]))
    if not t:
        continue
    print(f'\n### {"Ping-pong" if kind == "pp" else "Bandwidth (bw, window 16)"} across the nodes: {unit}, median over rounds')
    cols = [h for h in ('0', '8K', '64K', 'ucx') if any(k[0] == h for k in t)]
    print('| size | ' + ' | '.join(f'hint {h}' if h != 'ucx' else 'UCX' for h in cols) +
          ' | ' + ' | '.join(f'hint {h} / UCX' for h in cols if h != 'ucx') + ' |')
    print('|---' * (1 + 2 * len(cols) - 1) + '|')
    for s in sorted({k[1] for k in t}):
        m = {h: med(t[(h, s)]) for h in cols if (h, s) in t}
        print(f'| {sz(s)} | ' + ' | '.join(f'{m[h]:.1f}' if h in m else '-' for h in cols) + ' | ' +
              ' | '.join(f'{m[h] / m["ucx"]:.2f}' if h in m and 'ucx' in m else '-' for h in cols if h != 'ucx') + ' |')
PYEOF
}

if [[ ${1:-} == --guest ]]; then
  guest "$2"
  exit 0
fi
if [[ ${1:-} == --summary ]]; then
  summary "${2:-$OUT}"
  exit
fi
mkdir -p "$OUT"
export PREFIX ROUNDS AR_HINTS PP_STACKS AR_SIZES AR_ITERS AR_BUDGET PP_SIZES PP_ITERS BW_SIZES UCX_TLS
"$here/../softroce-vm" --nodes 2 --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-3600}" -- \
  bash "$here/cluster-bench.sh" --guest "$OUT" 2>&1 | tee "$OUT.log"
summary "$OUT" | tee "$OUT/summary.md"

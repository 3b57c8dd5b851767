#!/usr/bin/env bash
# Soft-RoCE benchmark of btl/llrdma, used for the "Soft-RoCE" section of
# docs/benchmarks-softroce.md.  Each repetition boots one Soft-RoCE guest
# (contrib/softroce-vm, TCG) and measures, side by side on the same rxe0:
#   1. the raw verbs floor: perftest ib_send_lat, 8 B (one-way figures; x2 = round trip)
#   2. btl/llrdma: llrdma-bench sweep --hints 0,8K,64K over pml ob1 + btl self,llrdma
#   3. UCX over rxe0: llrdma-bench pingpong at the same sizes (pml ucx)
#
# Usage (as root, from the source tree root, after building and installing into
# $PREFIX, by default as below):
#   rm -rf /tmp/sb && mkdir /tmp/sb && cd /tmp/sb && /work/main/configure --prefix=/tmp/sb/inst \
#     && make -j2 && make install
#   contrib/bench/softroce-bench.sh [REPS]       # default 3; results in $OUT (default /tmp/sb/bench)
#   contrib/bench/softroce-bench.sh --control   # UCX with/without btl/llrdma opened (one guest)
#   contrib/bench/softroce-bench.sh --summary [DIR]   # only the tables, from DIR/rep*/ (python3)
# Environment: PREFIX (/tmp/sb/inst), OUT (/tmp/sb/bench, must lie under a directory the
# guest can write: it is passed with --rw), WARMUP/ITERS (pingpong, llrdma and UCX),
# PT_ITERS (perftest iterations), VM_TIMEOUT (seconds per guest).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/tmp/sb/inst}
OUT=${OUT:-/tmp/sb/bench}
WARMUP=${WARMUP:-100}
ITERS=${ITERS:-1000}
PT_ITERS=${PT_ITERS:-10000}
SIZES=8,256,1K,4K,8K,16K,62K,64K
# the sweep adds hint-1, hint, hint+1 for each hint; UCX gets the same sizes
UCX_SIZES=$SIZES,8191,8193,65535,65537

guest() {
  local d=$1
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  export LLRDMA_MPIRUN=${LLRDMA_MPIRUN:-$(command -v mpirun)}
  local dev=${SOFTROCE_VM_IBDEV:-rxe0} gid=${SOFTROCE_VM_GID_INDEX:-1} t0=$SECONDS
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"
    echo "rdma_rxe: $(lsmod | grep -c '^rdma_rxe')"
    echo "mpirun: $("$LLRDMA_MPIRUN" --version | head -1)"
    echo "ucx: $(ucx_info -v 2>/dev/null | head -1)"
    echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2>/dev/null)"
    echo "rdma-core: $(dpkg-query -W -f '${Version}' rdma-core 2>/dev/null)"
    ibv_devinfo -d "$dev" | grep -E 'hca_id|transport|active_mtu|link_layer|state'
    echo "WARMUP=$WARMUP ITERS=$ITERS PT_ITERS=$PT_ITERS"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"

  echo "=== 1. perftest ib_send_lat -s 8 -n $PT_ITERS ($((SECONDS - t0)) s)"
  timeout 300 ib_send_lat -d "$dev" -x "$gid" -s 8 -n "$PT_ITERS" > "$d/perftest-server.txt" 2>&1 &
  local spid=$! i
  for i in $(seq 300); do
    ss -ltnH 'sport = :18515' | grep -q . && break
    kill -0 "$spid" 2> /dev/null || break
    sleep 0.1
  done
  timeout 300 ib_send_lat -d "$dev" -x "$gid" -s 8 -n "$PT_ITERS" 127.0.0.1 > "$d/perftest-client.txt" 2>&1
  echo "client rc=$?"; wait "$spid"; echo "server rc=$?"
  cat "$d/perftest-client.txt"

  echo "=== 2. llrdma sweep ($((SECONDS - t0)) s)"
  timeout 900 llrdma-bench sweep --hints 0,8K,64K \
    --mpirun-args "--mca pml ob1 --mca btl self,llrdma --bind-to none" \
    --csv "$d/llrdma-sweep.csv" --show-output -- --warmup "$WARMUP" --iters "$ITERS" \
    > "$d/llrdma-sweep.txt" 2>&1
  echo "sweep rc=$?"
  cat "$d/llrdma-sweep.txt"

  echo "=== 3. UCX pingpong ($((SECONDS - t0)) s)"
  timeout 600 "$LLRDMA_MPIRUN" -np 2 --bind-to none \
    --mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi --mca osc ^ucx \
    -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_UD_ETH_DGID_CHECK=n \
    llrdma-bench pingpong --sizes "$UCX_SIZES" --warmup "$WARMUP" --iters "$ITERS" \
    --csv "$d/ucx.csv" > "$d/ucx.txt" 2>&1
  echo "ucx rc=$?"
  cat "$d/ucx.txt"
  echo "=== done ($((SECONDS - t0)) s)"
}

# Control (one guest): does btl/llrdma, opened but unused, change the UCX numbers?
# UCX pingpong with the flags above, then the same with llrdma excluded, 3 times alternating.
control() {
  local d=$1 i v
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  for i in 1 2 3; do
    for v in with-llrdma no-llrdma; do
      local excl=^vader,tcp,openib,uct,ofi
      [[ $v == no-llrdma ]] && excl=$excl,llrdma
      timeout 300 mpirun -np 2 --bind-to none --mca pml ucx --mca btl "$excl" --mca osc ^ucx \
        -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_UD_ETH_DGID_CHECK=n \
        llrdma-bench pingpong --sizes 8,256,1K,8K --warmup "$WARMUP" --iters "$ITERS" \
        --csv "$d/ucx-$v-$i.csv" > "$d/ucx-$v-$i.txt" 2>&1
      echo "$v $i rc=$?"; grep -E '^ +(8 B|256 B|1 KB|8 KB)|rank0 host' "$d/ucx-$v-$i.txt"
    done
  done
}

# Medians over the repetitions in $1 (rep*/): the tables of docs/benchmarks-softroce.md.
summary() {
  python3 - "$1" <<'PYEOF'
import csv, glob, os, re, statistics as st, sys
out = sys.argv[1]
reps = sorted(d for d in glob.glob(os.path.join(out, 'rep*')) if os.path.isdir(d))
med = st.median
def load(path, hint=None):
    rows = {}
    for r in csv.DictReader(l for l in open(path) if not l.startswith('#')):
        h = int(r['hint']) if hint is None else hint
        rows[(h, int(r['size']))] = (float(r['p50_us']), float(r['p99_us']), int(r['iters']))
    return rows
pt, sw, ux = [], [], []
for d in reps:
    txt = open(os.path.join(d, 'perftest-client.txt')).read()
    m = re.search(r'^\s*8\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)', txt, re.M)
    it, tmin, tmax, ttyp, tavg, tsd, t99, t999 = m.groups()
    pt.append(dict(iters=int(it), typ=float(ttyp), avg=float(tavg), p99=float(t99), min=float(tmin)))
    sw.append(load(os.path.join(d, 'llrdma-sweep.csv')))
    ux.append(load(os.path.join(d, 'ucx.csv'), hint=-1))
n = len(reps)
print(f'repetitions: {n} ({", ".join(os.path.basename(d) for d in reps)})')
def fmt(x): return f'{x:.1f}' if x >= 10 else f'{x:.2f}'
def sz(s):
    return f'{s//1024} KB' if s % 1024 == 0 and s >= 1024 else f'{s} B'
print('\n### perftest ib_send_lat, 8 B (one-way, as printed) and round trip = 2 x t_typical')
print('| rep | iters | t_min | t_typical | t_avg | 99% | round trip (2 x t_typical) |\n|---|---|---|---|---|---|---|')
for i, p in enumerate(pt):
    print(f'| {i+1} | {p["iters"]} | {p["min"]:.2f} | {p["typ"]:.2f} | {p["avg"]:.2f} | {p["p99"]:.2f} | {2*p["typ"]:.2f} |')
rt = [2 * p['typ'] for p in pt]
print(f'| median | | {med(p["min"] for p in pt):.2f} | {med(p["typ"] for p in pt):.2f} | {med(p["avg"] for p in pt):.2f} | {med(p["p99"] for p in pt):.2f} | {med(rt):.2f} |')
v = [p['p99'] / p['typ'] for p in pt]
print(f'\nperftest 99% / t_typical (its own tail): median {st.median(v):.2f}; per rep ' + ', '.join(f'{x:.2f}' for x in v))
hints = sorted({h for s in sw for (h, _) in s})
sizes = [8, 256, 1024, 4096, 8192, 16384, 63488, 65536]
def mval(src, key, k):  # median over reps of field k (0=p50, 1=p99)
    v = [s[key][k] for s in src if key in s]
    return med(v) if len(v) == n else None
def mratio(src_a, ka, src_b, kb, fa=0, fb=0):
    v = [a[ka][fa] / b[kb][fb] for a, b in zip(src_a, src_b) if ka in a and kb in b]
    return (med(v), min(v), max(v)) if len(v) == n else None
hn = {0: 'hint 0', 8192: 'hint 8 KB', 65536: 'hint 64 KB'}
print('\n### Round-trip P50 (us), median of reps; UCX column: pml ucx, same tool')
print('| size | ' + ' | '.join(hn.get(h, str(h)) for h in hints) + ' | UCX | ' + ' | '.join(hn.get(h, str(h)) + ' / UCX' for h in hints) + ' |')
print('|---' * (2 * len(hints) + 2) + '|')
for s in sizes:
    cells = [fmt(mval(sw, (h, s), 0)) for h in hints] + [fmt(mval(ux, (-1, s), 0))]
    rats = [mratio(sw, (h, s), ux, (-1, s)) for h in hints]
    print(f'| {sz(s)} | ' + ' | '.join(cells) + ' | ' + ' | '.join(f'{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})' for r in rats) + ' |')
print('\n### Percentiles (us, round trip), median of reps')
print('| setting | 8 B P50 | 8 B P99 | 62 KB P50 | 62 KB P99 |\n|---|---|---|---|---|')
for h, src, key in [(h, sw, h) for h in hints] + [('UCX', ux, -1)]:
    print(f'| {hn.get(h, h)} | ' + ' | '.join(fmt(mval(src, (key, s), k)) for s in (8, 63488) for k in (0, 1)) + ' |')
print('\n### llrdma 8 B / raw verbs (llrdma P50 round trip / (2 x perftest t_typical)), per rep then median (min-max)')
for h in hints:
    v = [s[(h, 8)][0] / r for s, r in zip(sw, rt)]
    print(f'- {hn[h]}: {med(v):.2f} ({min(v):.2f}-{max(v):.2f}); per rep ' + ', '.join(f'{x:.2f}' for x in v))
v = [u[(-1, 8)][0] / r for u, r in zip(ux, rt)]
print(f'- UCX: {med(v):.2f} ({min(v):.2f}-{max(v):.2f})')
print('\n### Cliff: hint+1 / hint and hint / hint-1 (P50 and P99), per rep then median (min-max); UCX at the same sizes as control')
for h in hints:
    if h == 0: continue
    for lab, src, key in [('llrdma ' + hn[h], sw, h), ('UCX (same sizes)', ux, -1)]:
        a = mratio(src, (key, h + 1), src, (key, h), 0, 0); b = mratio(src, (key, h + 1), src, (key, h), 1, 1)
        c = mratio(src, (key, h), src, (key, h - 1), 0, 0)
        print(f'- {lab}: P50({h+1})/P50({h}) = {a[0]:.2f} ({a[1]:.2f}-{a[2]:.2f}); P99 ratio {b[0]:.2f} ({b[1]:.2f}-{b[2]:.2f}); P50({h})/P50({h-1}) = {c[0]:.2f}')
print('\n### Tail P99/P50 per size up to 4x hint, per rep then median (min-max)')
allsz = sorted({s for r in sw for (_, s) in r})
for h, src, key in [(h, sw, h) for h in hints] + [('UCX', ux, -1)]:
    lim = 4 * h if isinstance(h, int) and h > 0 else 1 << 62
    parts = []
    worst = 0
    for s in allsz:
        if s > lim or (key, s) not in src[0]: continue
        r = mratio(src, (key, s), src, (key, s), 1, 0)
        if r is None: continue
        worst = max(worst, r[0])
        parts.append(f'{sz(s)} {r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})')
    print(f'- {hn.get(h, h)}: ' + '; '.join(parts) + f'; worst median {worst:.2f}')
print('\niters per size:', sorted({v[2] for s in sw + ux for v in s.values()}))
PYEOF
}

if [[ ${1:-} == --guest ]]; then
  guest "$2"
  exit 0
fi
if [[ ${1:-} == --guest-control ]]; then
  control "$2"
  exit 0
fi
if [[ ${1:-} == --control ]]; then    # host side of the control run
  export PREFIX WARMUP ITERS
  "$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1500}" -- \
    bash "$here/softroce-bench.sh" --guest-control "$OUT/control" 2>&1 | tee "$OUT/control.log"
  exit
fi
if [[ ${1:-} == --summary ]]; then
  summary "${2:-$OUT}"
  exit
fi

reps=${1:-3}
mkdir -p "$OUT"
export PREFIX WARMUP ITERS PT_ITERS
for r in $(seq "$reps"); do
  echo "##### repetition $r"
  "$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1500}" -- \
    bash "$here/softroce-bench.sh" --guest "$OUT/rep$r" 2>&1 | tee "$OUT/rep$r.log"
done
summary "$OUT" | tee "$OUT/summary.md"

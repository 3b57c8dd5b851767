#!/usr/bin/env bash
# Incast benchmark of btl/llrdma against UCX, in ONE Soft-RoCE guest boot
# (contrib/softroce-vm, TCG), all on the same rxe0:
#   1. llrdma-bench incast over pml ob1 + btl self,llrdma at hints 0, 8K and 64K:
#      ranks 1..NP-1 each MPI_Isend MESSAGES messages of each of SIZES to rank 0
#      while rank 0 computes for BUSY_MS without calling MPI; ITERS rounds
#   2. the same program over pml ucx (UCX on rxe0), once per entry of TLS_LIST
#   3. llrdma-bench sweep --hints 0,8K,64K (round-trip P50s), so a change to flow
#      control can be checked for what it costs the low-latency path
# then prints one table (python3).  docs/bench.md says what incast measures.
#
# Usage (as root, after building and installing into $PREFIX):
#   contrib/bench/incast-bench.sh                 # one guest; results in $OUT
#   contrib/bench/incast-bench.sh --summary [DIR] # only the tables, from DIR (default $OUT)
# Environment: PREFIX (/tmp/sb/inst), OUT (/tmp/sb/incast; must lie under a directory
# the guest can write: its parent is passed with --rw), NP (4), MESSAGES (400),
# SIZES (8,4K), BUSY_MS (1000), ITERS (3), TLS_LIST ("rc_verbs,ud_verbs,self rc,self"),
# PP_WARMUP/PP_ITERS (sweep: 100/1000), PP_SIZES (8,256,1K,4K,8K,16K,64K),
# VM_TIMEOUT (seconds for the guest, 1500), COALESCE ("1": btl_llrdma_coalesce as
# given; "1 0" also runs every hint without coalescing, named hint-nocoalesce),
# SQ_BATCH ("1": btl_llrdma_sq_batch as given; "1 0" also runs every hint and the
# ping-pong sweep without batching, named hint-nobatch and pingpong-sweep-nobatch),
# HINTS ("0 8K 64K": the llrdma runs, in this order), BTL_VERBOSE (0:
# btl_llrdma_verbose of the incast runs; 5 adds the finalize counters, e.g. the
# waits begun at a busy send queue, to each run's .err file).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/tmp/sb/inst}
OUT=${OUT:-/tmp/sb/incast}
NP=${NP:-4}
MESSAGES=${MESSAGES:-400}
SIZES=${SIZES:-8,4K}
BUSY_MS=${BUSY_MS:-1000}
ITERS=${ITERS:-3}
TLS_LIST=${TLS_LIST:-rc_verbs,ud_verbs,self rc,self}
PP_WARMUP=${PP_WARMUP:-100}
PP_ITERS=${PP_ITERS:-1000}
PP_SIZES=${PP_SIZES:-8,256,1K,4K,8K,16K,64K}
HINTS=${HINTS:-0 8K 64K}
COALESCE=${COALESCE:-1}
SQ_BATCH=${SQ_BATCH:-1}
BTL_VERBOSE=${BTL_VERBOSE:-0}
# Ranks float and yield when idle (NP ranks share the guest's vCPUs with rxe's
# kernel work; docs/btl-design.md, "Known limits"); the same for both stacks.
COMMON=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
UCX=(--mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi,llrdma --mca osc ^ucx
     -x UCX_NET_DEVICES=rxe0:1 -x UCX_UD_ETH_DGID_CHECK=n)

incast_args() {
  echo incast --messages "$MESSAGES" --size "$SIZES" --busy-ms "$BUSY_MS" --iters "$ITERS" --json
}

run() { # NAME, then the command: stdout to NAME.json, stderr to NAME.err, status to NAME.rc
  local name=$1 t0=$SECONDS rc=0; shift
  "$@" > "$name.json" 2> "$name.err" || rc=$?
  echo "$rc" > "$name.rc"
  echo "--- $(basename "$name"): exit $rc, $((SECONDS - t0)) s"
  grep -v '^#' "$name.err" | tail -n 8
  grep '^{"size"' "$name.json" | cut -c1-200
}

sweep() { # NAME, then extra MCA words: llrdma-bench sweep at hints 0, 8K, 64K to NAME.csv/.txt
  local name=$1 rc=0; shift
  timeout 900 llrdma-bench sweep --hints 0,8K,64K \
    --mpirun-args "--mca pml ob1 --mca btl self,llrdma --bind-to none${*:+ $*}" \
    --csv "$name.csv" -- --warmup "$PP_WARMUP" --iters "$PP_ITERS" \
    --sizes "$PP_SIZES" > "$name.txt" 2>&1 || rc=$?
  echo "sweep $(basename "$name") rc=$rc"
  cat "$name.txt"
}

guest() {
  local d=$1 t0=$SECONDS h tls
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  export LLRDMA_MPIRUN=${LLRDMA_MPIRUN:-$(command -v mpirun)}
  local dev=${SOFTROCE_VM_IBDEV:-rxe0}
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"
    echo "mpirun: $("$LLRDMA_MPIRUN" --version | head -1)"
    echo "ompi_info ucx: $(ompi_info 2> /dev/null | grep -E 'MCA (pml|osc): ucx' | tr -s ' ' | tr '\n' ';')"
    if command -v ucx_info > /dev/null; then
      echo "ucx: $(ucx_info -v | head -1)"
      echo "ucx_info -d, transports on $dev:"
      ucx_info -d | awk -v dev="$dev" '/Transport:/ { t = $3 } /Device:/ && $3 ~ "^" dev { print "  " t " on " $3 }'
    else
      echo "ucx: ucx_info not installed (Debian package ucx-utils); libucx0 $(dpkg-query -W -f '${Version}' libucx0 2> /dev/null)"
    fi
    echo "rdma-core: $(dpkg-query -W -f '${Version}' rdma-core 2> /dev/null)"
    ibv_devinfo -d "$dev" | grep -E 'hca_id|transport|active_mtu|link_layer|state'
    echo "NP=$NP MESSAGES=$MESSAGES SIZES=$SIZES BUSY_MS=$BUSY_MS ITERS=$ITERS"
    echo "TLS_LIST=$TLS_LIST PP_WARMUP=$PP_WARMUP PP_ITERS=$PP_ITERS PP_SIZES=$PP_SIZES"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"

  echo "=== 1. incast over btl/llrdma ($((SECONDS - t0)) s)"
  # shellcheck disable=SC2046  # incast_args prints options, one per word
  for h in $HINTS; do
    for c in $COALESCE; do
      for b in $SQ_BATCH; do
        run "$d/incast-llrdma-$h$([[ $c == 0 ]] && echo -nocoalesce)$([[ $b == 0 ]] && echo -nobatch)" \
          timeout 900 "$LLRDMA_MPIRUN" -np "$NP" "${COMMON[@]}" --mca pml ob1 --mca btl self,llrdma \
          --mca btl_llrdma_size_hint "$h" --mca btl_llrdma_coalesce "$c" \
          --mca btl_llrdma_sq_batch "$b" --mca btl_llrdma_verbose "$BTL_VERBOSE" llrdma-bench $(incast_args)
      done
    done
  done
  echo "=== 2. incast over UCX ($((SECONDS - t0)) s)"
  # shellcheck disable=SC2046  # as above
  for tls in $TLS_LIST; do
    run "$d/incast-ucx-$tls" timeout 900 "$LLRDMA_MPIRUN" -np "$NP" "${COMMON[@]}" "${UCX[@]}" \
      -x UCX_TLS="$tls" llrdma-bench $(incast_args)
  done
  echo "=== 3. ping-pong sweep over btl/llrdma ($((SECONDS - t0)) s)"
  sweep "$d/pingpong-sweep"
  if [[ " $SQ_BATCH " == *" 0 "* ]]; then
    sweep "$d/pingpong-sweep-nobatch" --mca btl_llrdma_sq_batch 0
  fi
  echo "=== done ($((SECONDS - t0)) s)"
}

summary() {
  python3 - "$1" << 'PYEOF'
import csv, glob, json, os, sys
d = sys.argv[1]
def label(s):
    return f'{s // 1024} KB' if s >= 1024 and s % 1024 == 0 else f'{s} B'
def num(x, f='{:.1f}'):
    return '-' if x is None else f.format(x)
def ms(us):
    return '-' if us is None else f'{us / 1000:.2f}'
runs = []
for path in sorted(glob.glob(os.path.join(d, 'incast-*.rc'))):
    name = os.path.basename(path)[len('incast-'):-3]
    rc = int(open(path).read().strip() or -1)
    try:  # the JSON document; UCX may print warnings on stdout before it
        text = open(path[:-3] + '.json').read()
        doc = json.JSONDecoder().raw_decode(text[text.index('{"bench"'):])[0]
    except (OSError, ValueError):
        doc = None
    hint = name[7:].split('-')[0]
    order = (0, ['0', '8K', '64K'].index(hint), name) if name.startswith('llrdma-') and hint in ('0', '8K', '64K') else (1, 0, name)
    runs.append((order, name, rc, doc))
runs.sort(key=lambda r: (r[0], r[1]))
first = next((doc for _, _, _, doc in runs if doc), None)
if first:
    print(f"### Incast: {first['senders']} senders x {first['messages']} messages per size -> rank 0, "
          f"busy {first['busy_ms']} ms ({first['busy']}), {first['rounds']} round(s)")
print('drain = rank 0 end of busy -> last message; send = slowest sender first Isend -> '
      'Waitall; P50/max over rounds; lat = arrival - max(Isend, wake), P50/P99 over all '
      'messages; all in ms\n')
print('| setting | size | drain P50 | drain max | send P50 | send max | lat P50 | lat P99 | data | exit |')
print('|---|---|---|---|---|---|---|---|---|---|')
for _, name, rc, doc in runs:
    setting = ('btl/llrdma hint ' + name[7:].replace('-', ', ')) if name.startswith('llrdma-') else 'UCX ' + name[4:]
    if not doc:
        print(f'| {setting} | - | - | - | - | - | - | - | no result | {rc} |')
        continue
    for r in doc['results']:
        data = 'verified' if doc['verified'] and r['errors'] == 0 else 'CORRUPT'
        print(f"| {setting} | {label(r['size'])} | {num(r['drain_ms_p50'], '{:.2f}')} | "
              f"{num(r['drain_ms_max'], '{:.2f}')} | {num(r['sender_ms_p50'])} | {num(r['sender_ms_max'])} | "
              f"{ms(r['lat_us_p50'])} | {ms(r['lat_us_p99'])} | {data} | {rc} |")
for sweep, what in (('pingpong-sweep', ''), ('pingpong-sweep-nobatch', ', btl_llrdma_sq_batch 0')):
    sw = os.path.join(d, sweep + '.csv')
    if not os.path.exists(sw):
        continue
    rows = {}
    for r in csv.DictReader(l for l in open(sw) if not l.startswith('#')):
        rows[(int(r['hint']), int(r['size']))] = (float(r['p50_us']), float(r['p99_us']))
    hints = sorted({h for h, _ in rows})
    sizes = sorted({s for _, s in rows})
    print(f'\n### Round-trip ping-pong over btl/llrdma{what}, P50 (P99) in us (llrdma-bench sweep)')
    print('| size | ' + ' | '.join(f'hint {label(h) if h else 0}' for h in hints) + ' |')
    print('|---' * (len(hints) + 1) + '|')
    for s in sizes:
        cells = [f'{rows[(h, s)][0]:.1f} ({rows[(h, s)][1]:.1f})' if (h, s) in rows else '-' for h in hints]
        print(f'| {label(s)} | ' + ' | '.join(cells) + ' |')
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
if [[ $# -gt 0 ]]; then
  sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
mkdir -p "$OUT"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  if git -C "$here/../.." rev-parse --git-dir > /dev/null 2>&1; then
    echo "source: $(git -C "$here/../.." rev-parse --short HEAD)" \
         "($(git -C "$here/../.." status --short -uno | wc -l) modified tracked files)"
  else
    echo "source: $here/../.. (not a git checkout)"
  fi
  echo "prefix: $PREFIX"
} > "$OUT/host.txt"
cat "$OUT/host.txt"
export PREFIX NP MESSAGES SIZES BUSY_MS ITERS TLS_LIST PP_WARMUP PP_ITERS PP_SIZES COALESCE SQ_BATCH BTL_VERBOSE HINTS
"$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1500}" -- \
  bash "$here/incast-bench.sh" --guest "$OUT" 2>&1 | tee "$OUT/guest.log"
summary "$OUT" | tee "$OUT/summary.md"

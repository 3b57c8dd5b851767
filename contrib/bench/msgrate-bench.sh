#!/usr/bin/env bash
# Message rate of btl/llrdma against UCX, in ONE Soft-RoCE guest boot
# (contrib/softroce-vm, TCG), all on the same rxe0 (issue 25's goal: >= 1.0x
# UCX at 8 B and 4 KB, window 64, hint 8K):
#   llrdma-bench pingpong --rate --verify: windows of WINDOW non-blocking sends
#   rank 0 -> rank 1 closed by a zero-byte ack, every payload checked; over
#   pml ob1 + btl self,llrdma at hints 0, 8K and 64K, and over pml ucx
#   (UCX_TLS=rc_verbs,ud_verbs,self: RC needs UD to connect); ROUNDS alternated
#   rounds of the four.
# Prints one table (python3): msgs/s per stack and round, and llrdma / UCX.
#
# Usage (as root, after building and installing into $PREFIX):
#   contrib/bench/msgrate-bench.sh                 # one guest; results in $OUT
#   contrib/bench/msgrate-bench.sh --summary [DIR] # only the table, from DIR (default $OUT)
# Environment: PREFIX (/tmp/sb/inst), OUT (/tmp/sb/msgrate; its parent must be
# writable: it is passed with --rw), SIZES (8,4K), WINDOW (64), WINDOWS (2000),
# ROUNDS (3), VM_TIMEOUT (seconds for the guest, 1500), HINTS ("0 8K 64K"),
# PP_WARMUP, PP_ITERS (10, 10: round trips per size before the rate, tabulated),
# VARIANT ("NAME=MCA words": one more llrdma stack per round at hint 8K, named
# llrdma-NAME, e.g. VARIANT="postsend=--mca btl_llrdma_wr_api 0").
set -u
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/tmp/sb/inst}
OUT=${OUT:-/tmp/sb/msgrate}
SIZES=${SIZES:-8,4K}
WINDOW=${WINDOW:-64}
WINDOWS=${WINDOWS:-2000}
ROUNDS=${ROUNDS:-3}
PP_WARMUP=${PP_WARMUP:-10}
PP_ITERS=${PP_ITERS:-10}
HINTS=${HINTS:-0 8K 64K}
COMMON=(-np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
UCX=(--mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi,llrdma --mca osc ^ucx
     -x UCX_NET_DEVICES=rxe0:1 -x UCX_UD_ETH_DGID_CHECK=n -x UCX_TLS=rc_verbs,ud_verbs,self)

rate_args() {
  echo pingpong --rate --window "$WINDOW" --windows "$WINDOWS" --sizes "$SIZES" \
    --warmup "$PP_WARMUP" --iters "$PP_ITERS" --verify --csv -
}

run() { # NAME, then the command: stdout (CSV) to NAME.csv, stderr to NAME.err, status to NAME.rc
  local name=$1 t0=$SECONDS rc=0; shift
  "$@" > "$name.csv" 2> "$name.err" || rc=$?
  echo "$rc" > "$name.rc"
  echo "--- $(basename "$name"): exit $rc, $((SECONDS - t0)) s"
  grep -v '^#' "$name.err" | tail -n 5
}

guest() {
  local d=$1 t0=$SECONDS h k
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  local mpirun=${LLRDMA_MPIRUN:-$(command -v mpirun)}
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"
    echo "mpirun: $("$mpirun" --version | head -1)"
    echo "libucx0: $(dpkg-query -W -f '${Version}' libucx0 2> /dev/null)"
    echo "rdma-core: $(dpkg-query -W -f '${Version}' rdma-core 2> /dev/null)"
    echo "SIZES=$SIZES WINDOW=$WINDOW WINDOWS=$WINDOWS ROUNDS=$ROUNDS"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"
  # shellcheck disable=SC2046  # rate_args prints options, one per word
  for k in $(seq "$ROUNDS"); do
    for h in $HINTS; do
      run "$d/r$k-llrdma-$h" timeout 600 "$mpirun" "${COMMON[@]}" --mca pml ob1 \
        --mca btl self,llrdma --mca btl_llrdma_size_hint "$h" llrdma-bench $(rate_args)
    done
    if [ -n "${VARIANT:-}" ]; then # NAME=MCA-WORDS: one more llrdma stack at hint 8K
      # shellcheck disable=SC2086  # the MCA words split on purpose
      run "$d/r$k-llrdma-${VARIANT%%=*}" timeout 600 "$mpirun" "${COMMON[@]}" --mca pml ob1 \
        --mca btl self,llrdma --mca btl_llrdma_size_hint 8K ${VARIANT#*=} llrdma-bench $(rate_args)
    fi
    run "$d/r$k-ucx" timeout 600 "$mpirun" "${COMMON[@]}" "${UCX[@]}" llrdma-bench $(rate_args)
  done
  echo "=== done ($((SECONDS - t0)) s)"
}

summary() {
  python3 - "$1" << 'PYEOF'
import csv, glob, os, re, sys
d = sys.argv[1]
rates = {}  # (round, stack) -> {size: msgs/s}
lat = {}  # (stack, size) -> [(P50, P99) per round]
bad = []
for path in sorted(glob.glob(os.path.join(d, 'r*-*.csv'))):
    m = re.match(r'r(\d+)-(.*)\.csv$', os.path.basename(path))
    k, stack = int(m.group(1)), m.group(2)
    rc = open(path[:-4] + '.rc').read().strip()
    if rc != '0':
        bad.append(f'{os.path.basename(path)[:-4]}: exit {rc}')
        continue
    rows = [l for l in open(path) if not l.startswith('#')]
    for row in csv.DictReader(rows):
        if row.get('rate_msgs_s'):
            rates.setdefault((k, stack), {})[int(row['size'])] = float(row['rate_msgs_s'])
        if row.get('p50_us'):
            lat.setdefault((stack, int(row['size'])), []).append(
                (float(row['p50_us']), float(row['p99_us'])))
sizes = sorted({s for v in rates.values() for s in v})
stacks = sorted({s for (_, s) in rates}, key=lambda s: (s == 'ucx', s))
print('| round | stack | ' + ' | '.join(f'{s} B msgs/s' for s in sizes) + ' | '
      + ' | '.join(f'{s} B / UCX' for s in sizes) + ' |')
print('| --- ' * (2 + 2 * len(sizes)) + '|')
for k in sorted({k for (k, _) in rates}):
    u = rates.get((k, 'ucx'), {})
    for st in stacks:
        r = rates.get((k, st))
        if r is None:
            continue
        cells = [f'{r.get(s, 0):.0f}' for s in sizes]
        ratio = [f'{r[s] / u[s]:.2f}' if s in r and u.get(s) else '-' for s in sizes]
        print(f'| {k} | {st} | ' + ' | '.join(cells) + ' | ' + ' | '.join(ratio) + ' |')
def med(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
print('\nRound trip (the same runs, before the rate), us: median over rounds of P50 (P99)')
print('| stack | ' + ' | '.join(f'{s} B' for s in sizes) + ' |')
print('| --- ' * (1 + len(sizes)) + '|')
for st in stacks:
    cells = []
    for s in sizes:
        v = lat.get((st, s), [])
        cells.append(f'{med([a for a, _ in v]):.1f} ({med([b for _, b in v]):.1f})' if v else '-')
    print(f'| {st} | ' + ' | '.join(cells) + ' |')
for b in bad:
    print('FAILED:', b)
PYEOF
}

bench_note() { echo "prefix: $PREFIX"; }
# shellcheck source=contrib/bench/bench-lib.sh
. "$here/bench-lib.sh"
bench_main "$0" "$@"
export PREFIX SIZES WINDOW WINDOWS ROUNDS HINTS VARIANT PP_WARMUP PP_ITERS
"$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1500}" -- \
  bash "$here/msgrate-bench.sh" --guest "$OUT" 2>&1 | tee "$OUT/guest.log"
summary "$OUT" | tee "$OUT/summary.md"

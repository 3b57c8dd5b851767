#!/usr/bin/env bash
# Bandwidth of btl/llrdma against perftest and UCX, in ONE Soft-RoCE guest boot
# (contrib/softroce-vm, TCG), all on the same rxe0, 2 ranks / processes:
#   llrdma-bw-H, llrdma-bibw-H  llrdma-bench bw / bibw over pml ob1 + btl self,llrdma at
#                               size hint H (0, 8K, 64K), btl_llrdma_rdma default (get)
#   llrdma-bw-8K-put, -off      the same at hint 8K with btl_llrdma_rdma=put / off
#                               (ob1's RPUT / send-receive only; RGET is llrdma-bw-8K);
#                               a further suffix -nobatch adds btl_llrdma_sq_batch=0
#                               (llrdma-bw-8K-nobatch, llrdma-bw-8K-off-nobatch)
#   ucx-bw, ucx-bibw            the same program over pml ucx (UCX_TLS=$UCX_TLS on rxe0)
#   pt-write, pt-read           perftest ib_write_bw / ib_read_bw, server and client in the
#                               guest, one run per size, -n = PT_BUDGET / size (5..2000);
#                               sizes above the port's max_msg_sz (rxe: 8 MiB) are skipped
# ROUNDS rounds; each round runs every configuration once, the order rotated by one
# per round, so no configuration always runs first or last.  Then one table of
# medians over the rounds and the ratios against the goals of issue 11 (python3).
# The host's load average is sampled every 30 s while the guest runs (host-load.txt).
#
# Usage (as root, from a build tree made with ./configure && make; nothing installed):
#   contrib/bench/bw-bench.sh                   # one guest; results in $OUT
#   contrib/bench/bw-bench.sh --summary [DIR]   # only the tables, from DIR (default $OUT)
# Environment: BUILD (the build tree, default $PWD), OUT ($BUILD/bw-bench; must lie under
# a directory the guest can write: BUILD is passed with --rw), ROUNDS (3), SIZES
# (1K,4K,16K,64K,256K,1M,2M,4M,8M,16M,64M), WINDOW (16), WINDOW_BYTES (8M), ITERS (100),
# WARMUP (5), MIN_ITERS (1), BUDGET (16M bytes per size and direction), PT_BUDGET (16M),
# UCX_TLS (rc_verbs,ud_verbs,self), RUN_TIMEOUT (seconds per mpirun, 420: then the
# stacks of both ranks and rxe0's counters go to NAME.rROUND.hang), CONFIGS (all of the above, space-separated),
# VM_TIMEOUT (seconds for the guest, 3600), BIND (core: rank 0 and the perftest server on
# vCPU 0, rank 1 and the client on vCPU 1; none: the guest's scheduler places them).  Runs
# are bimodal either way (a whole run near 45 or near 27 MB/s), unpinned more often.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$PWD}
OUT=${OUT:-$BUILD/bw-bench}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-1K,4K,16K,64K,256K,1M,2M,4M,8M,16M,64M}
WINDOW=${WINDOW:-16}
WINDOW_BYTES=${WINDOW_BYTES:-8M}
ITERS=${ITERS:-100}
WARMUP=${WARMUP:-5}
MIN_ITERS=${MIN_ITERS:-1}
BUDGET=${BUDGET:-16M}
PT_BUDGET=${PT_BUDGET:-16M}
UCX_TLS=${UCX_TLS:-rc_verbs,ud_verbs,self}
RUN_TIMEOUT=${RUN_TIMEOUT:-420}
BIND=${BIND:-core}
case $BIND in
  core | none) ;;
  *) echo "bw-bench.sh: BIND=$BIND (environment): expected core or none" >&2; exit 2 ;;
esac
CONFIGS=${CONFIGS:-llrdma-bw-0 llrdma-bw-8K llrdma-bw-64K llrdma-bibw-0 llrdma-bibw-8K \
llrdma-bibw-64K llrdma-bw-8K-put llrdma-bw-8K-off ucx-bw ucx-bibw pt-write pt-read}

bytes() { # 16K -> 16384
  local v=${1%[KMG]} u=${1##*[0-9]}
  case $u in K) echo $((v << 10)) ;; M) echo $((v << 20)) ;; G) echo $((v << 30)) ;; *) echo "$v" ;; esac
}

bench_args() { # MODE
  echo "$1" --sizes "$SIZES" --window "$WINDOW" --window-bytes "$WINDOW_BYTES" --iters "$ITERS" \
    --warmup "$WARMUP" --min-iters "$MIN_ITERS" --budget "$BUDGET" --csv -
}

# perftest PROG NAME: one server/client pair per size on rxe0; NAME.csv gets
# size,iters,bw_MBps (10^6 B/s: perftest's MB/sec is 2^20 B/s) per size.
perftest() {
  local prog=$1 name=$2 dev=${SOFTROCE_VM_IBDEV:-rxe0} gid=${SOFTROCE_VM_GID_INDEX:-1} s n b i max
  local pin0=() pin1=()
  [[ $BIND == core ]] && pin0=(taskset -c 0) && pin1=(taskset -c 1)
  max=$(ibv_devinfo -v -d "$dev" | awk '/max_msg_sz/ { print $2; exit }')
  max=$((max))
  echo "size,iters,bw_MBps" > "$name.csv"
  : > "$name.out"
  for s in ${SIZES//,/ }; do
    b=$(bytes "$s")
    if ((max > 0 && b > max)); then
      echo "# $prog: $b bytes skipped: above the port's max_msg_sz $max" >> "$name.out"
      continue
    fi
    n=$(($(bytes "$PT_BUDGET") / b))
    ((n < 5)) && n=5
    ((n > 2000)) && n=2000
    timeout 180 ${pin0[@]+"${pin0[@]}"} "$prog" -d "$dev" -x "$gid" -F -s "$b" -n "$n" > "$name.srv" 2>&1 &
    for i in $(seq 100); do
      ss -ltnH 'sport = :18515' | grep -q . && break
      sleep 0.1
    done
    timeout 180 ${pin1[@]+"${pin1[@]}"} "$prog" -d "$dev" -x "$gid" -F -s "$b" -n "$n" 127.0.0.1 > "$name.cli" 2>&1
    wait
    cat "$name.cli" >> "$name.out"
    # " 1048576    200    45.37    13.81    0.000014": bytes iters peak average Mpps
    awk -v b="$b" '$1 == b && NF >= 5 { printf "%s,%s,%.3f\n", $1, $2, $4 * 1.048576 }' \
      "$name.cli" >> "$name.csv"
  done
  rm -f "$name.srv" "$name.cli"
}

# mpi_run FILE ARGS...: mpirun ARGS with stdout/stderr to FILE.out/.err and a
# limit of RUN_TIMEOUT seconds; at the limit every llrdma-bench process's
# stacks (gdb) and rxe0's counters go to FILE.hang before it is killed (exit 124).
mpi_run() {
  local f=$1 pid t=0 p c
  shift
  mpirun "$@" > "$f.out" 2> "$f.err" &
  pid=$!
  while kill -0 "$pid" 2> /dev/null && ((t < RUN_TIMEOUT)); do
    sleep 2
    t=$((t + 2))
  done
  if kill -0 "$pid" 2> /dev/null; then
    {
      echo "timeout after $RUN_TIMEOUT s"
      for p in $(pgrep -f '^[^ ]*/llrdma-bench (bw|bibw)'); do
        echo "=== pid $p: $(tr '\0' ' ' < /proc/"$p"/cmdline)"
        timeout 120 gdb -batch -p "$p" -ex 'thread apply all bt' 2>&1 | grep -E '^(#|Thread)'
      done
      for c in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
        echo "$(basename "$c") $(cat "$c")"
      done
    } > "$f.hang" 2>&1
    kill "$pid"
    sleep 5
    pkill -9 -f '^[^ ]*/llrdma-bench (bw|bibw)'
    wait "$pid"
    return 124
  fi
  wait "$pid"
}

run_config() { # CONFIG ROUND
  local c=$1 r=$2 f="$d/$1.r$2" t0=$SECONDS rc=0 h m
  local ob1=(--mca pml ob1 --mca btl self,llrdma) bind=(--bind-to none)
  [[ $BIND == core ]] && bind=(--map-by core --bind-to core)
  local ucx=(--mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi,llrdma --mca osc ^ucx
    -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS="$UCX_TLS" -x UCX_UD_ETH_DGID_CHECK=n)
  case $c in
    llrdma-bw-* | llrdma-bibw-*)
      m=${c#llrdma-}; m=${m%%-*}
      h=${c#llrdma-"$m"-}
      local extra=() words w
      if [[ $h == *-* ]]; then # suffixes: put, off (btl_llrdma_rdma), nobatch (sq_batch 0)
        IFS=- read -r -a words <<< "${h#*-}"
        for w in "${words[@]}"; do
          if [[ $w == nobatch ]]; then extra+=(--mca btl_llrdma_sq_batch 0)
          else extra+=(--mca btl_llrdma_rdma "$w"); fi
        done
        h=${h%%-*}
      fi
      # shellcheck disable=SC2046  # bench_args prints options, one per word
      mpi_run "$f" -np 2 "${bind[@]}" "${ob1[@]}" --mca btl_llrdma_size_hint "$h" \
        "${extra[@]}" "$BENCH" $(bench_args "$m") || rc=$?
      ;;
    ucx-*)
      # shellcheck disable=SC2046  # as above
      mpi_run "$f" -np 2 "${bind[@]}" "${ucx[@]}" "$BENCH" $(bench_args "${c#ucx-}") || rc=$?
      ;;
    pt-write) perftest ib_write_bw "$f" || rc=$? ;;
    pt-read) perftest ib_read_bw "$f" || rc=$? ;;
    *) echo "unknown configuration $c" > "$f.err"; rc=2 ;;
  esac
  [[ $c != pt-* ]] && grep -E '^[0-9]+,[0-9]+,' "$f.out" | sed '1i hint,size,window,iters,bw_MBps,msgs_s' > "$f.csv"
  echo "$rc $((SECONDS - t0))" > "$f.rc"
  printf '%-18s round %d: exit %d, %4d s, load %s; MB/s:' "$c" "$r" "$rc" $((SECONDS - t0)) \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  tail -n +2 "$f.csv" | awk -F, '{ printf " %s", (NF == 3 ? $3 : $5) }'
  echo
  [[ $rc != 0 ]] && grep -v '^#' "$f.err" | tail -n 5
  return 0
}

guest() {
  d=$1
  mkdir -p "$d"
  export OMPI_MCA_mca_base_component_path="$BUILD/.libs:SYS_DEFAULT"
  export LD_LIBRARY_PATH="$BUILD/.libs" LLRDMA_HELPDIR="$src/common"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  BENCH="$BUILD/.libs/llrdma-bench"
  [[ -x $BENCH ]] || BENCH="$BUILD/llrdma-bench"
  local dev=${SOFTROCE_VM_IBDEV:-rxe0} t0=$SECONDS list n r i
  read -r -a list <<< "$CONFIGS"
  {
    echo "uname: $(uname -srvm)"
    echo "nproc: $(nproc); memory: $(awk '/MemTotal/ { print $2 " kB" }' /proc/meminfo)"
    echo "mpirun: $(mpirun --version | head -1)"
    echo "ucx: libucx0 $(dpkg-query -W -f '${Version}' libucx0 2> /dev/null)"
    echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2> /dev/null)"
    echo "rdma-core: $(dpkg-query -W -f '${Version}' rdma-core 2> /dev/null)"
    ibv_devinfo -v -d "$dev" | grep -E 'hca_id|transport|active_mtu|max_msg_sz|max_qp_rd_atom|max_qp_init_rd_atom|max_mr_size|state'
    echo "ROUNDS=$ROUNDS SIZES=$SIZES WINDOW=$WINDOW WINDOW_BYTES=$WINDOW_BYTES ITERS=$ITERS"
    echo "WARMUP=$WARMUP MIN_ITERS=$MIN_ITERS BUDGET=$BUDGET PT_BUDGET=$PT_BUDGET UCX_TLS=$UCX_TLS RUN_TIMEOUT=$RUN_TIMEOUT BIND=$BIND"
    echo "llrdma-bench: $BENCH $(bench_args bw)"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"
  n=${#list[@]}
  for ((r = 1; r <= ROUNDS; ++r)); do
    echo "=== round $r ($((SECONDS - t0)) s)"
    for ((i = 0; i < n; ++i)); do
      run_config "${list[$(((i + r - 1) % n))]}" "$r"
    done
  done
  echo "=== done ($((SECONDS - t0)) s)"
}

summary() {
  python3 - "$1" << 'PYEOF'
import csv, glob, os, re, statistics as st, sys
d = sys.argv[1]
data = {}  # config -> size -> [MB/s per round]
zeros = []  # results of 0 MB/s, left out
for path in sorted(glob.glob(os.path.join(d, '*.r*.csv'))):
    m = re.match(r'(.*)\.r(\d+)\.csv$', os.path.basename(path))
    cfg = m.group(1)
    for row in csv.DictReader(l for l in open(path) if not l.startswith('#')):
        if float(row['bw_MBps']) <= 0:  # perftest printed 0.00 (ib_read_bw at 8 MiB on rxe)
            zeros.append(f"{cfg} round {m.group(2)} {row['size']} B")
            continue
        data.setdefault(cfg, {}).setdefault(int(row['size']), []).append(float(row['bw_MBps']))
def label(s):
    return f'{s >> 20} MB' if s >= 1 << 20 else f'{s >> 10} KB' if s >= 1024 else f'{s} B'
def med(cfg, s):
    v = data.get(cfg, {}).get(s)
    return st.median(v) if v else None
def cell(cfg, s):
    v = data.get(cfg, {}).get(s)
    if not v:
        return '-'
    return f'{st.median(v):.2f} ({min(v):.2f}-{max(v):.2f})' if len(v) > 1 else f'{v[0]:.2f}'
sizes = sorted({s for c in data.values() for s in c})
rounds = max((len(v) for c in data.values() for v in c.values()), default=0)
def table(title, cols):
    cols = [(n, c) for n, c in cols if c in data]
    if not cols:
        return
    print(f'\n### {title}: MB/s (10^6 B/s), median over {rounds} rounds (min-max)\n')
    print('| size | ' + ' | '.join(n for n, _ in cols) + ' |')
    print('|---' * (len(cols) + 1) + '|')
    for s in sizes:
        print(f'| {label(s)} | ' + ' | '.join(cell(c, s) for _, c in cols) + ' |')
table('One direction (bw)', [('llrdma hint 0', 'llrdma-bw-0'), ('llrdma hint 8K', 'llrdma-bw-8K'),
      ('llrdma hint 64K', 'llrdma-bw-64K'), ('hint 8K, rdma=put', 'llrdma-bw-8K-put'),
      ('hint 8K, rdma=off', 'llrdma-bw-8K-off'), ('hint 8K, no batching', 'llrdma-bw-8K-nobatch'),
      ('hint 8K, rdma=off, no batching', 'llrdma-bw-8K-off-nobatch'), ('UCX', 'ucx-bw'),
      ('ib_write_bw', 'pt-write'), ('ib_read_bw', 'pt-read')])
table('Both directions (bibw)', [('llrdma hint 0', 'llrdma-bibw-0'), ('llrdma hint 8K', 'llrdma-bibw-8K'),
      ('llrdma hint 64K', 'llrdma-bibw-64K'), ('UCX', 'ucx-bibw')])
def ratio(a, b, s):
    x, y = med(a, s), med(b, s)
    return None if x is None or not y else x / y
def rounds_ratio(a, b, s):
    xa, xb = data.get(a, {}).get(s, []), data.get(b, {}).get(s, [])
    r = [x / y for x, y in zip(xa, xb) if y]
    return f' (per round {min(r):.2f}-{max(r):.2f})' if len(r) > 1 else ''
def fmt(r):
    return '-' if r is None else f'{r:.2f}'
print('\n### Ratios (of the medians; per-round ratios of the same round in parentheses)\n')
print('| ratio | goal | ' + ' | '.join(label(s) for s in sizes) + ' |')
print('|---|---|' + '---|' * len(sizes))
def row(name, goal, a, b, smin=0):
    if a not in data or b not in data:
        return
    cells = []
    for s in sizes:
        r, mark = ratio(a, b, s), ''
        if r is None and b.startswith('pt-') and data.get(b) and med(a, s):
            # perftest cannot send more than the port's max_msg_sz: its largest size
            top = max(data[b])
            if top < s:
                r, mark = med(a, s) / med(b, top), '*'
        cells.append(fmt(r) + mark if s >= smin else '')
    print(f'| {name} | {goal} | ' + ' | '.join(cells) + ' |')
row('bw hint 8K / hint 0', '>= 0.98 at 2 MB', 'llrdma-bw-8K', 'llrdma-bw-0')
row('bibw hint 8K / hint 0', '>= 0.98 at 2 MB', 'llrdma-bibw-8K', 'llrdma-bibw-0')
for h in ('0', '8K', '64K'):
    row(f'bw hint {h} / ib_write_bw', '>= 0.9 from 256 KB', f'llrdma-bw-{h}', 'pt-write', 256 << 10)
for h in ('0', '8K', '64K'):
    row(f'bw hint {h} / UCX', '>= 1 from 64 KB', f'llrdma-bw-{h}', 'ucx-bw', 64 << 10)
for h in ('0', '8K', '64K'):
    row(f'bibw hint {h} / UCX', '>= 1 from 64 KB', f'llrdma-bibw-{h}', 'ucx-bibw', 64 << 10)
row('hint 8K: put / get', '(decision)', 'llrdma-bw-8K-put', 'llrdma-bw-8K', 64 << 10)
row('hint 8K: off / get', '(decision)', 'llrdma-bw-8K-off', 'llrdma-bw-8K', 64 << 10)
row('hint 8K: batching / none', '(sq_batch)', 'llrdma-bw-8K', 'llrdma-bw-8K-nobatch')
row('hint 8K, rdma=off: batching / none', '(sq_batch)', 'llrdma-bw-8K-off',
    'llrdma-bw-8K-off-nobatch')
row('ib_read_bw / ib_write_bw', '(device)', 'pt-read', 'pt-write')
print('\n\\* against perftest at its largest size (the port\'s max_msg_sz): one message cannot be larger')
two = 2 << 20
print('\n2 MB, hint 8K / hint 0: bw ' + fmt(ratio('llrdma-bw-8K', 'llrdma-bw-0', two)) +
      rounds_ratio('llrdma-bw-8K', 'llrdma-bw-0', two) + '; bibw ' +
      fmt(ratio('llrdma-bibw-8K', 'llrdma-bibw-0', two)) + rounds_ratio('llrdma-bibw-8K', 'llrdma-bibw-0', two))
if zeros:
    print('\nleft out (0 MB/s reported): ' + ', '.join(zeros))
bad = sorted(glob.glob(os.path.join(d, '*.rc')))
fails = [os.path.basename(p)[:-3] + ': ' + open(p).read().split()[0] for p in bad
         if open(p).read().split()[0] != '0']
print('\nruns: ' + str(len(bad)) + '; failed: ' + (', '.join(fails) if fails else 'none') +
      ' (124: RUN_TIMEOUT, stacks in NAME.rN.hang; its rows up to the hang are in the tables)')
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
  echo "source: $(git -C "$src" rev-parse --short HEAD 2> /dev/null)" \
    "($(git -C "$src" status --short -uno 2> /dev/null | wc -l) modified tracked files)"
  echo "build: $BUILD"
  echo "host: $(nproc) cores, $(uname -sr), load at start: $(cat /proc/loadavg)"
} > "$OUT/host.txt"
cat "$OUT/host.txt"
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done) > "$OUT/host-load.txt" &
sampler=$!
export BIND BUILD ROUNDS SIZES WINDOW WINDOW_BYTES ITERS WARMUP MIN_ITERS BUDGET PT_BUDGET UCX_TLS CONFIGS \
  RUN_TIMEOUT
"$here/../softroce-vm" --rw "$BUILD" --timeout "${VM_TIMEOUT:-3600}" -- \
  bash "$here/bw-bench.sh" --guest "$OUT" 2>&1 | tee "$OUT/guest.log"
kill "$sampler"
echo "host load average (1/5/15 min) during the run: $(awk '{ print $2 }' "$OUT/host-load.txt" |
  sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "1-min min %s, median %s, max %s over %d samples", v[1], v[int((NR + 1) / 2)], v[NR], NR }')" |
  tee -a "$OUT/host.txt"
summary "$OUT" | tee "$OUT/summary.md"

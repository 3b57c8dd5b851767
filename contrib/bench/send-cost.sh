#!/usr/bin/env bash
# User-space instructions per 8-byte send and per received 8-byte message,
# counted by valgrind's callgrind, in ONE Soft-RoCE guest boot
# (contrib/softroce-vm, TCG), all on the same rxe0.  Rank 0 of
# contrib/bench/send-cost.c runs under callgrind, rank 1 natively, twice per
# setting:
#   - ITERS blocking 8 B ping-pongs (every message checked): the calls and the
#     inclusive instructions per call of MPI_Send and of the transport's send
#     entry, the BTL's (llrdma_sendi) or UCX's (uct_rc_verbs_ep_am_short), both
#     including the verbs provider's post;
#   - the drain mode, collecting only in drain() (rank 0 receives bursts of 16
#     messages that arrived while it slept, after 20 bursts that are not
#     collected, in which the receive queue grows): the transport's receive handling
#     per message, from the call graph: every call into the transport's
#     objects from outside them, less every call the transport makes up into
#     the layer above (ob1 and libmpi, or UCP, pml/ucx and libmpi).  So it
#     includes the verbs provider's poll and receive repost and the empty
#     polls, not the matching or the copy into the user's buffer.
#     Transport objects: mca_btl_llrdma, libllrdma, libibverbs and its rxe
#     provider; libuct* (rc_verbs) and the same two.  libopen-pal and libucs
#     (the progress loop, free lists and memory pools of either) count where
#     the transport calls them and not where the layer above does.
# Settings (SETTINGS):
#   1. pml ob1 + btl self,llrdma at hints 0, 8K and 64K (PREFIX's install)
#   2. the same with BASE_PREFIX's install, when set (an older llrdma to compare)
#   3. pml ucx on rxe0 (UCX_TLS from SC_UCX_TLS, default rc_verbs,tcp,self;
#      UCX_NET_DEVICES from SC_UCX_DEVICES, default rxe0:1,dummy0; more
#      UCX_ settings in SC_UCX_ENV).  Not run by default: UCX 1.13 finds no
#      wire-up transport for rc_verbs in TCP ("no auxiliary transport"), and
#      with UD the endpoint of a rank under callgrind dies of "unhandled
#      timeout error" even with UCX_UD_TIMEOUT=3600s (exit 134, every boot
#      from 2026-12-03 to 2026-12-06).
#   4. uct: UCX's transport layer without UCP, ucx_perftest over rc_verbs on
#      rxe0 (package ucx-utils; no wire-up: it connects the queue pairs
#      itself): am_lat with the client under callgrind (am_short per send),
#      and am_bw of ITERS * 5 messages with the receiving server under
#      callgrind.  The whole server is collected, so its receive handling is
#      the transport function entered most often from outside (rc_verbs'
#      progress) less its calls into ucx_perftest's AM handler, per handler
#      call.  ucx_perftest does not check payloads.
# Instructions are what the CPU executes in user space; rxe's kernel work and
# the wire are not in them.
#
# Usage (as root, after building and installing into $PREFIX):
#   contrib/bench/send-cost.sh                 # one guest; results in $OUT
#   contrib/bench/send-cost.sh --summary [DIR] # only the tables, from DIR
# Environment: PREFIX (/tmp/sb/inst), BASE_PREFIX (unset), OUT (/tmp/sb/sendcost;
# its parent is passed to the guest with --rw), ITERS (2000), SIZE (8),
# SETTINGS ("llrdma base uct": which of 1-4 to run), VM_TIMEOUT (1200),
# SC_UCX_DEVICES, SC_UCX_TLS, SC_UCX_ENV (setting 3), SC_UCT_DEVICE (setting 4,
# rxe0:1), PEER_CG=1 (rank 1 under callgrind too).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/tmp/sb/inst}
BASE_PREFIX=${BASE_PREFIX:-}
OUT=${OUT:-/tmp/sb/sendcost}
ITERS=${ITERS:-2000}
SIZE=${SIZE:-8}
COMMON=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
UCX=(--mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi,llrdma --mca osc ^ucx
     -x UCX_NET_DEVICES="${SC_UCX_DEVICES:-rxe0:1,dummy0}" -x UCX_TLS="${SC_UCX_TLS:-rc_verbs,tcp,self}"
     -x UCX_RC_VERBS_TIMEOUT=100s)
for v in ${SC_UCX_ENV:-}; do UCX+=(-x "$v"); done
SETTINGS=${SETTINGS:-llrdma base uct}

one() { # NAME PREFIX MPIRUN-OPTIONS...: rank 0 under callgrind (rank 1 too with PEER_CG=1)
  local name=$1 prefix=$2
  shift 2
  run_cg "$name" "$prefix" "" "$@"
  run_cg "$name.drain" "$prefix" drain "$@"
}

run_cg() { # NAME PREFIX MODE MPIRUN-OPTIONS...
  local name=$1 prefix=$2 mode=$3 rc=0 peer=() cg=()
  shift 3
  [[ -n $mode ]] && cg=(--toggle-collect=drain)
  [[ ${PEER_CG:-0} == 1 ]] && peer=(valgrind --tool=callgrind "${cg[@]}" --callgrind-out-file="$d/$name.peer")
  OMPI_MCA_mca_base_component_path="$prefix/lib/openmpi:SYS_DEFAULT" \
    LD_LIBRARY_PATH="$prefix/lib" timeout 900 mpirun -np 1 "${COMMON[@]}" "$@" \
    valgrind --tool=callgrind "${cg[@]}" --callgrind-out-file="$d/$name.cg" \
    "$d/send-cost" "$ITERS" "$SIZE" $mode \
    : -np 1 "${peer[@]}" "$d/send-cost" "$ITERS" "$SIZE" $mode > "$d/$name.out" 2>&1 || rc=$?
  echo "$rc" > "$d/$name.rc"
  [[ -z $mode ]] && callgrind_annotate --inclusive=yes --threshold=100 "$d/$name.cg" > "$d/$name.txt" 2>&1
  echo "--- $name: exit $rc; $(grep -h 'send-cost rank' "$d/$name.out" | tr '\n' ' ')"
}

guest() {
  d=$1
  mkdir -p "$d"
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"
    echo "mpirun: $(mpirun --version | head -1)"
    echo "valgrind: $(valgrind --version)"
    echo "libucx0: $(dpkg-query -W -f '${Version}' libucx0 2> /dev/null)"
    echo "rdma-core: $(dpkg-query -W -f '${Version}' rdma-core 2> /dev/null)"
    echo "ITERS=$ITERS SIZE=$SIZE PREFIX=$PREFIX BASE_PREFIX=$BASE_PREFIX"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"
  mpicc -O2 -o "$d/send-cost" "$here/send-cost.c" || { echo "mpicc failed"; return 1; }
  if [[ " $SETTINGS " == *" llrdma "* ]]; then
    for h in 0 8K 64K; do
      one "llrdma-$h" "$PREFIX" --mca pml ob1 --mca btl self,llrdma --mca btl_llrdma_size_hint "$h"
    done
  fi
  if [[ -n "$BASE_PREFIX" && " $SETTINGS " == *" base "* ]]; then
    for h in 0 8K 64K; do
      one "base-$h" "$BASE_PREFIX" --mca pml ob1 --mca btl self,llrdma \
        --mca btl_llrdma_size_hint "$h"
    done
  fi
  if [[ " $SETTINGS " == *" ucx "* ]]; then
    one ucx "$PREFIX" "${UCX[@]}"
  fi
  if [[ " $SETTINGS " == *" uct "* ]]; then
    uct
  fi
}

uct() { # UCX's transport layer alone: ucx_perftest over rc_verbs on rxe0, no UCP wire-up
  local p=(-d "${SC_UCT_DEVICE:-rxe0:1}" -x rc_verbs) rc=0 rcs=0
  command -v ucx_perftest > /dev/null || { echo "--- uct: ucx_perftest missing (apt-get install ucx-utils)"; return; }
  # Sends: am_lat (ping-pong), the client under callgrind.
  ucx_perftest "${p[@]}" -p 13350 > "$d/uct.server.out" 2>&1 &
  sleep 2
  timeout 900 valgrind --tool=callgrind --callgrind-out-file="$d/uct.cg" ucx_perftest 127.0.0.1 \
    "${p[@]}" -p 13350 -t am_lat -s "$SIZE" -n "$ITERS" -w 100 > "$d/uct.out" 2>&1 || rc=$?
  wait $! || rcs=$?
  echo $((rc | rcs)) > "$d/uct.rc"
  callgrind_annotate --inclusive=yes --threshold=100 "$d/uct.cg" > "$d/uct.txt" 2>&1
  echo "--- uct: exit $rc (server $rcs); $(grep -h '^Final' "$d/uct.out")"
  # Receives: am_bw (a stream), the server (the receiving side) under callgrind.
  rc=0 rcs=0
  timeout 900 valgrind --tool=callgrind --callgrind-out-file="$d/uct.drain.cg" ucx_perftest \
    "${p[@]}" -p 13351 > "$d/uct.drain.server.out" 2>&1 &
  local server=$!
  sleep 20 # valgrind's start
  timeout 900 ucx_perftest 127.0.0.1 "${p[@]}" -p 13351 -t am_bw -s "$SIZE" -n $((ITERS * 5)) \
    -w 100 > "$d/uct.drain.out" 2>&1 || rc=$?
  wait $server || rcs=$?
  echo $((rc | rcs)) > "$d/uct.drain.rc"
  echo "--- uct.drain: exit $rc (server $rcs); $(grep -h '^Final' "$d/uct.drain.out")"
}

summary() {
  python3 - "$1" << 'PYEOF'
import glob, os, re, sys
d = sys.argv[1]
FNS = ['PMPI_Send', 'llrdma_sendi', 'uct_rc_verbs_ep_am_short']
def calls(path):
    names, cur, out = {}, None, {}
    for line in open(path, errors='replace'):
        m = re.match(r'c?fn=\((\d+)\)(?: (.*))?', line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2).strip()
            if line.startswith('cfn='):
                cur = names.get(m.group(1))
            continue
        m = re.match(r'calls=(\d+)', line)
        if m and cur:
            out[cur] = out.get(cur, 0) + int(m.group(1))
    return out
def inclusive(path):
    out = {}
    for line in open(path, errors='replace'):
        m = re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(?:\* )?\S*?:(\S+)', line)
        if m:
            out.setdefault(m.group(2), int(m.group(1).replace(',', '')))
    return out
rows = []
for cg in sorted(glob.glob(os.path.join(d, '*.cg'))):
    name = os.path.basename(cg)[:-3]
    if name.endswith('.drain') or not os.path.exists(cg[:-3] + '.rc'):
        continue
    rc = open(cg[:-3] + '.rc').read().strip()
    out = open(cg[:-3] + '.out', errors='replace').read()
    m = re.search(r'send-cost rank 0: PASS sends (\d+)', out)
    if name == 'uct' and rc == '0' and re.search(r'^Final:\s+(\d+)', out, re.M):
        m = re.search(r'^Final:\s+(\d+)', out, re.M) # ucx_perftest's iterations
    c, inc = calls(cg), inclusive(cg[:-3] + '.txt')
    cells = []
    for f in FNS:
        n = c.get(f, 0)
        cells.append(f'{inc[f] / n:.0f} ({n})' if n and f in inc else '-')
    rows.append((name, rc, m.group(1) if m else 'no PASS', cells))
print('| setting | exit | sends | ' + ' | '.join(f'{f} Ir/call (calls)' for f in FNS) + ' |')
print('|---' * (len(FNS) + 3) + '|')
for name, rc, sends, cells in rows:
    print(f'| {name} | {rc} | {sends} | ' + ' | '.join(cells) + ' |')

# The drain runs: calls into the transport's objects from outside them, less
# the transport's calls up into the layer above, per received message.
TRANSPORT = re.compile(r'mca_btl_llrdma|libllrdma|libibverbs|librxe|libuct')
ABOVE = re.compile(r'mca_pml_|libmpi|libucp|ucx_perftest')
def edges(path):
    ids, ob, cob, pending, into, up, entries, by_obj = {}, None, None, None, 0, 0, 0, {}
    fns, cfn, hot, up_calls = {}, None, {}, 0
    def obj(spec):
        m = re.match(r'\((\d+)\)(?: (.*))?', spec)
        if not m:
            return spec
        if m.group(2):
            ids[m.group(1)] = m.group(2).strip()
        return ids.get(m.group(1), '?')
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if line.startswith('ob='):
            ob, cob = obj(line[3:]), None
        elif line.startswith('cob='):
            cob = obj(line[4:])
        elif line.startswith('fn='):
            cob = None
            m = re.match(r'fn=\((\d+)\)(?: (.*))?', line)
            if m and m.group(2):
                fns[m.group(1)] = m.group(2).strip()
        elif line.startswith('cfn='):
            m = re.match(r'cfn=\((\d+)\)(?: (.*))?', line)
            if m:
                if m.group(2):
                    fns[m.group(1)] = m.group(2).strip()
                cfn = (os.path.basename(cob if cob is not None else ob or ''), fns.get(m.group(1), '?'))
        elif line.startswith('calls='):
            pending = (ob, cob if cob is not None else ob, int(line[6:].split()[0]))
        elif pending and re.match(r'[-+*\d]', line):
            caller, callee, n = pending
            cost = int(line.split()[1]) if len(line.split()) > 1 else 0
            t_caller, t_callee = bool(TRANSPORT.search(caller or '')), bool(TRANSPORT.search(callee or ''))
            if t_callee and not t_caller:
                into += cost
                entries += n
                key = os.path.basename(callee)
                by_obj[key] = by_obj.get(key, 0) + cost
                h = hot.get(cfn, [0, 0])
                hot[cfn] = [h[0] + n, h[1] + cost]
            if t_caller and not t_callee and ABOVE.search(callee or ''):
                up += cost
                up_calls += n
            pending, cob = None, None
    return into, up, entries, by_obj, hot, up_calls
drains = sorted(c for c in glob.glob(os.path.join(d, '*.drain.cg')) if os.path.exists(c[:-3] + '.rc'))
split = {}
if drains:
    print()
    print('| setting | exit | received | into the transport Ir/msg | up from it Ir/msg | '
          'receive handling Ir/msg | entries/msg |')
    print('|---' * 7 + '|')
for cg in drains:
    name = os.path.basename(cg)[:-len('.drain.cg')]
    rc = open(cg[:-3] + '.rc').read().strip()
    out = open(cg[:-3] + '.out', errors='replace').read()
    m = re.search(r'send-cost rank 0: PASS sends \d+ received (\d+)', out)
    into, up, entries, by_obj, hot, up_calls = edges(cg)
    if name == 'uct' and rc == '0' and re.search(r'^Final:', out, re.M) and hot:
        # The whole server was collected (set-up too): only the transport
        # function entered most often from outside (rc_verbs' progress)
        # counts, and the messages are the calls up into the AM handler.
        key = max(hot, key=lambda k: hot[k][0])
        into, entries, n = hot[key][1], hot[key][0], up_calls
        by_obj = {f'{key[0]} {key[1]} (the hot entry)': into}
    else:
        n = int(m.group(1)) if m else 0
    if n == 0:
        print(f'| {name} | {rc} | no PASS | - | - | - | - |')
        continue
    print(f'| {name} | {rc} | {n} | {into / n:.0f} | {up / n:.0f} | {(into - up) / n:.0f} | '
          f'{entries / n:.2f} |')
    split[name] = ', '.join(f'{o} {c / n:.0f}' for o, c in sorted(by_obj.items(), key=lambda x: -x[1]))
if split:
    print()
    print('Calls into the transport per received message, by the object called:')
    for name, text in split.items():
        print(f'- {name}: {text}')
PYEOF
}

bench_note() { echo "prefix: $PREFIX; base prefix: ${BASE_PREFIX:-none}"; }
# shellcheck source=contrib/bench/bench-lib.sh
. "$here/bench-lib.sh"
bench_main "$0" "$@"
export PREFIX BASE_PREFIX ITERS SIZE SETTINGS SC_UCX_DEVICES SC_UCX_TLS SC_UCX_ENV SC_UCT_DEVICE PEER_CG
"$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1200}" -- \
  bash "$here/send-cost.sh" --guest "$OUT" 2>&1 | tee "$OUT/guest.log"
summary "$OUT" | tee "$OUT/summary.md"

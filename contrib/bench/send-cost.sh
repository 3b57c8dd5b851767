#!/usr/bin/env bash
# User-space instructions per 8-byte send, counted by valgrind's callgrind, in
# ONE Soft-RoCE guest boot (contrib/softroce-vm, TCG), all on the same rxe0:
# rank 0 of contrib/bench/send-cost.c (ITERS blocking 8 B ping-pongs, every
# message checked) runs under callgrind, rank 1 natively, over
#   1. pml ob1 + btl self,llrdma at hints 0, 8K and 64K (PREFIX's install)
#   2. the same with BASE_PREFIX's install, when set (an older llrdma to compare)
#   3. pml ucx, UCX_TLS=rc_verbs,ud_verbs,self (UCX on rxe0; its wire-up needs
#      UD, whose endpoint on a native rank 1 timed out waiting for a rank 0
#      under callgrind: both ranks run under callgrind here)
# and prints, per setting, the calls and the inclusive instructions per call of
# MPI_Send and of the transport's send entry: the BTL's (llrdma_sendi) or UCX's
# (uct_rc_verbs_ep_am_short), both including the verbs provider's post.
# Instructions are what the CPU executes in user space; rxe's kernel work and
# the wire are not in them.
#
# Usage (as root, after building and installing into $PREFIX):
#   contrib/bench/send-cost.sh                 # one guest; results in $OUT
#   contrib/bench/send-cost.sh --summary [DIR] # only the table, from DIR
# Environment: PREFIX (/tmp/sb/inst), BASE_PREFIX (unset), OUT (/tmp/sb/sendcost;
# its parent is passed to the guest with --rw), ITERS (2000), SIZE (8),
# SETTINGS ("llrdma base ucx": which of 1-3 to run), VM_TIMEOUT (1200).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/tmp/sb/inst}
BASE_PREFIX=${BASE_PREFIX:-}
OUT=${OUT:-/tmp/sb/sendcost}
ITERS=${ITERS:-2000}
SIZE=${SIZE:-8}
COMMON=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
UCX=(--mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi,llrdma --mca osc ^ucx
     -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_UD_ETH_DGID_CHECK=n
     -x UCX_UD_VERBS_TIMEOUT=3600s -x UCX_UD_TIMEOUT=3600s -x UCX_RC_VERBS_TIMEOUT=100s)
SETTINGS=${SETTINGS:-llrdma base ucx}

one() { # NAME PREFIX MPIRUN-OPTIONS...: rank 0 under callgrind (rank 1 too with PEER_CG=1)
  local name=$1 prefix=$2 rc=0 peer=()
  shift 2
  [[ ${PEER_CG:-0} == 1 ]] && peer=(valgrind --tool=callgrind --callgrind-out-file="$d/$name.peer")
  OMPI_MCA_mca_base_component_path="$prefix/lib/openmpi:SYS_DEFAULT" \
    LD_LIBRARY_PATH="$prefix/lib" timeout 900 mpirun -np 1 "${COMMON[@]}" "$@" \
    valgrind --tool=callgrind --callgrind-out-file="$d/$name.cg" "$d/send-cost" "$ITERS" "$SIZE" \
    : -np 1 "${peer[@]}" "$d/send-cost" "$ITERS" "$SIZE" > "$d/$name.out" 2>&1 || rc=$?
  echo "$rc" > "$d/$name.rc"
  callgrind_annotate --inclusive=yes --threshold=100 "$d/$name.cg" > "$d/$name.txt" 2>&1
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
    # Both ranks under callgrind: UD's wire-up endpoint of a native rank 1
    # timed out waiting for a rank 0 under callgrind.
    PEER_CG=1 one ucx "$PREFIX" "${UCX[@]}"
  fi
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
    rc = open(cg[:-3] + '.rc').read().strip()
    out = open(cg[:-3] + '.out', errors='replace').read()
    m = re.search(r'send-cost rank 0: PASS sends (\d+)', out)
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
PYEOF
}

bench_note() { echo "prefix: $PREFIX; base prefix: ${BASE_PREFIX:-none}"; }
# shellcheck source=contrib/bench/bench-lib.sh
. "$here/bench-lib.sh"
bench_main "$0" "$@"
export PREFIX BASE_PREFIX ITERS SIZE SETTINGS
"$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1200}" -- \
  bash "$here/send-cost.sh" --guest "$OUT" 2>&1 | tee "$OUT/guest.log"
summary "$OUT" | tee "$OUT/summary.md"

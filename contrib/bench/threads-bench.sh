#!/usr/bin/env bash
# Threads benchmark of btl/llrdma (issue 14), in ONE Soft-RoCE guest boot
# (contrib/softroce-vm, TCG), on rxe0, 2 ranks, --mca pml ob1 --mca btl self,llrdma:
#   1. 8 B ping-pong P50/P99 (tests/softroce/t_threads latency) at hint 8K, at
#      MPI_THREAD_SINGLE and MPI_THREAD_MULTIPLE, alternating, REPS times each;
#   2. overlap (t_threads overlap): rank 0 sends SIZE bytes to rank 1, both compute
#      COMPUTE_MS without MPI calls, then wait; "wait after compute" is what the
#      transfer still needed.  At hints 0 and 8K: progress thread off, on with the LL
#      idle look (btl_llrdma_progress_thread_ll_idle=LL_IDLE), on without it (=0);
#      REPS rounds, alternating.  Each run's finalize dumps give the progress
#      thread's CPU time and its share of the completions (llrdma-check --stats);
#   3. idle: the same with an 8-byte message, thread on with and without the LL idle
#      look: the thread's CPU time is then what its wake-ups cost.
# then prints the tables (python3).
#
# Usage (as root, after `make check` built tests/softroce/t_threads and `make install`
# put the components into $PREFIX):
#   contrib/bench/threads-bench.sh                  # one guest; results in $OUT
#   contrib/bench/threads-bench.sh --summary [DIR]  # only the tables
# Environment: PREFIX (_build/inst), T_THREADS (_build/tests/softroce/t_threads),
# OUT (_build/threads-bench; its parent is passed to the guest with --rw), REPS (3),
# ITERS (2000 round trips), COMPUTE_MS (3000), SIZE (16777216), MODES (latency overlap
# idle: the parts to run), LL_IDLE (btl_llrdma_progress_thread_ll_idle of the runs
# with the idle look, ms; default 10, the knob's default), VM_TIMEOUT (1500).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
PREFIX=${PREFIX:-$top/_build/inst}
T_THREADS=${T_THREADS:-$top/_build/tests/softroce/t_threads}
OUT=${OUT:-$top/_build/threads-bench}
REPS=${REPS:-3}
ITERS=${ITERS:-2000}
COMPUTE_MS=${COMPUTE_MS:-3000}
SIZE=${SIZE:-16777216}
MODES=${MODES:-latency overlap idle}
LL_IDLE=${LL_IDLE:-10}
B=(--mca pml ob1 --mca btl self,llrdma --bind-to none --mca mpi_yield_when_idle 1)

# overlap DIR TAG HINT MODE BYTES: one t_threads overlap run (MODE: off, on = the LL
# idle look at LL_IDLE ms, on-noll = the thread without it), its dumps summarised.
overlap() {
  local d=$1 tag=$2 hint=$3 mode=$4 n=$5 pt=1 idle=$LL_IDLE
  [[ $mode == off ]] && pt=0
  [[ $mode == on-noll ]] && idle=0
  mkdir -p "$d/dump-$tag"
  timeout 300 mpirun -np 2 "${B[@]}" --mca btl_llrdma_size_hint "$hint" \
    --mca btl_llrdma_progress_thread "$pt" --mca btl_llrdma_progress_thread_ll_idle "$idle" \
    --mca btl_llrdma_dump "$d/dump-$tag/d-%r.json" \
    "$T_THREADS" overlap "$COMPUTE_MS" "$n" > "$d/overlap-$tag.txt" 2>&1
  echo "overlap $tag rc=$?"
  grep -h 'overlap rank' "$d/overlap-$tag.txt"
  llrdma-check --stats "$d/dump-$tag"/d-*.json > "$d/stats-$tag.txt" 2>&1
  grep -hE 'cq:|progress thread' "$d/stats-$tag.txt"
}

guest() {
  local d=$1 r lvl hint mode
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"
    echo "mpirun: $(mpirun --version | head -1)"
    echo "REPS=$REPS ITERS=$ITERS COMPUTE_MS=$COMPUTE_MS SIZE=$SIZE MODES=$MODES LL_IDLE=$LL_IDLE"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"
  [[ $MODES == *latency* ]] && for r in $(seq "$REPS"); do
    for lvl in single multiple; do
      local env=()
      [[ $lvl == single ]] && env=(-x T_THREADS_SINGLE=1)
      timeout 300 mpirun -np 2 "${B[@]}" --mca btl_llrdma_size_hint 8K "${env[@]}" \
        "$T_THREADS" latency "$ITERS" > "$d/latency-$lvl-$r.txt" 2>&1
      echo "latency $lvl $r rc=$? $(grep -h 'latency:' "$d/latency-$lvl-$r.txt")"
    done
  done
  [[ $MODES == *overlap* ]] && for r in $(seq "$REPS"); do
    for hint in 0 8K; do
      for mode in off on on-noll; do
        overlap "$d" "$hint-$mode-$r" "$hint" "$mode" "$SIZE"
      done
    done
  done
  # The idle look's own cost: the same with an 8-byte message (no transfer to speak
  # of), so the thread's CPU time is its wake-ups, not rxe's kernel work (which runs
  # in the context of whichever thread posts or polls: see docs/benchmarks-softroce.md).
  [[ $MODES == *idle* ]] && for r in $(seq "$REPS"); do
    for mode in on on-noll; do
      overlap "$d" "idle-$mode-$r" 8K "$mode" 8
    done
  done
  echo "=== done"
}

summary() {
  python3 - "$1" <<'PYEOF'
import glob, os, re, statistics as st, sys
d = sys.argv[1]
med = st.median
print('### 8 B round trip at hint 8K (us): P50 / P99 per run')
print('| run | MPI_THREAD_SINGLE | MPI_THREAD_MULTIPLE |\n|---|---|---|')
lat = {}
for f in sorted(glob.glob(os.path.join(d, 'latency-*.txt'))):
    m = re.search(r'latency-(\w+)-(\d+)\.txt', f)
    t = re.search(r'p50 ([\d.]+) us p99 ([\d.]+) us', open(f).read())
    if t:
        lat[(m.group(1), int(m.group(2)))] = (float(t.group(1)), float(t.group(2)))
runs = sorted({r for (_, r) in lat})
for r in runs:
    c = [lat.get((l, r)) for l in ('single', 'multiple')]
    print(f'| {r} | ' + ' | '.join(f'{x[0]:.1f} / {x[1]:.1f}' if x else '-' for x in c) + ' |')
for l in ('single', 'multiple'):
    v = [lat[(l, r)][0] for r in runs if (l, r) in lat]
    if v:
        print(f'\nmedian P50 {l}: {med(v):.1f} us')
print('\n### Overlap: wait after compute (ms), rank 0 / rank 1; progress thread CPU (s, both ranks);'
      ' LL and BW completions taken by the thread (both ranks)')
print('| hint | progress thread | run | wait after compute | thread CPU | thread LL / BW completions |'
      '\n|---|---|---|---|---|---|')
rows = {}
for f in sorted(glob.glob(os.path.join(d, 'overlap-*.txt'))):
    tag = os.path.basename(f)[len('overlap-'):-4]
    if tag.startswith('idle-'):
        continue
    hint, mode, r = tag.rsplit('-', 2) if tag.count('-') == 2 else (tag.split('-')[0], '-'.join(tag.split('-')[1:-1]), tag.split('-')[-1])
    w = [float(x) for x in re.findall(r'wait after compute ([\d.]+) ms', open(f).read())]
    s = open(os.path.join(d, f'stats-{tag}.txt')).read() if os.path.exists(os.path.join(d, f'stats-{tag}.txt')) else ''
    cpu = sum(float(x) for x in re.findall(r'progress thread CPU time: ([\d.]+) s', s))
    ll = sum(int(x) for x in re.findall(r'll cq: \d+ completions, \d+ events(?: \([^)]*\))?, (\d+) of them', s))
    bw = sum(int(x) for x in re.findall(r'bw cq: \d+ completions, \d+ events(?: \([^)]*\))?, (\d+) of them', s))
    rows.setdefault((hint, mode), []).append(w)
    print(f'| {hint} | {mode} | {r} | ' + ' / '.join(f'{x:.0f}' for x in w) + f' | {cpu:.3f} | {ll} / {bw} |')
print('\n### Medians of the wait after compute (ms, both ranks pooled)')
print('| hint | off | on (LL idle look) | on, LL left to the application |\n|---|---|---|---|')
for hint in ('0', '8K'):
    c = []
    for mode in ('off', 'on', 'on-noll'):
        v = [x for w in rows.get((hint, mode), []) for x in w]
        c.append(f'{med(v):.0f}' if v else '-')
    print(f'| {hint} | ' + ' | '.join(c) + ' |')
idle = sorted(glob.glob(os.path.join(d, 'stats-idle-*.txt')))
if idle:
    ll = re.search(r'LL_IDLE=(\d+)', open(os.path.join(d, 'machine.txt')).read())
    print('\n### Idle: 8-byte message, hint 8K, thread on; its CPU time over the compute (s, both ranks)')
    print(f'| run | LL idle look (ll_idle {ll.group(1) if ll else 1}) | LL left to the application (ll_idle 0) |\n|---|---|---|')
    cpu = {}
    for f in idle:
        m = re.search(r'stats-idle-(on(?:-noll)?)-(\d+)\.txt', f)
        cpu[(m.group(1), m.group(2))] = sum(float(x) for x in re.findall(r'progress thread CPU time: ([\d.]+) s', open(f).read()))
    for r in sorted({k[1] for k in cpu}):
        print(f'| {r} | ' + ' | '.join(f'{cpu[(m, r)]:.3f}' if (m, r) in cpu else '-' for m in ('on', 'on-noll')) + ' |')
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
export PREFIX T_THREADS REPS ITERS COMPUTE_MS SIZE MODES LL_IDLE
"$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1500}" -- \
  bash "$here/threads-bench.sh" --guest "$OUT" 2>&1 | tee "$OUT.log"
summary "$OUT" | tee "$OUT/summary.md"

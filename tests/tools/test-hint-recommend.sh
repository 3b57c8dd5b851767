#!/usr/bin/env bash
# llrdma-hint recommend and llrdma-check --stats on fixture dumps (no MPI):
# the recommendation and its exit status, --json, directories, reruns, and
# every kind of bad input naming the file.
set -u
src="${srcdir:-.}"
. "$src/tests/tools/dumpgen.sh"
. "$src/tests/tools/tap.sh"

# A 4-rank job at hint 64K whose messages are 256 B..4K (failure case 1).
mkdir "$tmp/job"
for r in 0 1 2 3; do
  { echo '{"rank":'$r',"size_hint":65536,"btl_status":"active"}'
    mkrec $r 65536 40 "ll:8:500 ll:12:500"; } >"$tmp/job/llrdma-$r.json"
done
run "recommend: 4K for 256 B..4K traffic" 0 '^recommended hint: 4K \(4096 bytes\)' \
  ./llrdma-hint recommend "$tmp"/job/llrdma-*.json
run "recommend: warns the LL queue was often full" 0 'WARNING: the low-latency queue was full for 160 of 4000' \
  ./llrdma-hint recommend "$tmp/job"
run "recommend: hint too large (failure case 1)" 0 'WARNING: the current hint 64K is 16x' \
  ./llrdma-hint recommend "$tmp/job"
run "recommend: distribution with the hint marked" 0 'recommended hint 4K ---' \
  ./llrdma-hint recommend "$tmp/job"
run "recommend --json" 0 '^\{"recommendation":"hint","hint":4096,"hint_text":"4K","rules":\["median","plus_bit","queue_full","too_large"\],"ranks":4,' \
  ./llrdma-hint recommend --json "$tmp/job"

# Bimodal: 16 B control + 1 MB data.
mkrec 0 0 0 "bw:4:500 bw:20:500" >"$tmp/bimodal.json"
run "recommend: bimodal gives no hint" 0 "^recommendation: don't use a hint" \
  ./llrdma-hint recommend "$tmp/bimodal.json"
run "recommend --json: none" 0 '"recommendation":"none","hint":0,.*"rules":\["span"\]' \
  ./llrdma-hint recommend --json "$tmp/bimodal.json"

# A rerun appends to the same file: the latest record of a rank wins.
{ mkrec 0 0 0 "bw:20:100"; mkrec 0 0 0 "ll:10:100"; } >"$tmp/rerun.json"
run "recommend: the latest record of a rank wins" 0 '^recommended hint: 1K' \
  ./llrdma-hint recommend "$tmp/rerun.json"

# No traffic: exit 1.
mkrec 0 16384 0 "" >"$tmp/empty.json"
run "recommend: no traffic counted, exit 1" 1 '^no recommendation: no traffic' \
  ./llrdma-hint recommend "$tmp/empty.json"

# Bad input: every message names the file.
echo '{"rank":0,"size_hint":16384,"btl_status":"active"}' >"$tmp/init.json"
run "recommend: only MPI_Init records" 2 'none with statistics' ./llrdma-hint recommend "$tmp/init.json"
mkrec 0 0 0 "ll:10:5" | head -c 300 >"$tmp/trunc.json"
run "recommend: truncated dump names file and line" 2 "trunc.json:1: not valid JSON \(truncated or corrupt\)" \
  ./llrdma-hint recommend "$tmp/trunc.json"
echo '{"benchmark":"osu_latency","size":8}' >"$tmp/foreign.json"
run "recommend: foreign JSON names the file" 2 'foreign.json:1: not an llrdma dump record' \
  ./llrdma-hint recommend "$tmp/job" "$tmp/foreign.json"
printf 'hint,size,iters,p50_us\n0,8,1000,1.5\n' >"$tmp/sweep.csv"
run "recommend: a CSV names the file" 2 'sweep.csv:1: not valid JSON' ./llrdma-hint recommend "$tmp/sweep.csv"
: >"$tmp/zero.json"
run "recommend: empty file" 2 'zero.json: empty, not an llrdma dump' ./llrdma-hint recommend "$tmp/zero.json"
run "recommend: missing file" 2 'nope.json: cannot open: No such file' ./llrdma-hint recommend "$tmp/nope.json"
mkdir "$tmp/emptydir"
run "recommend: directory without dumps" 2 'emptydir: no \*.json dump' ./llrdma-hint recommend "$tmp/emptydir"
run "recommend: no argument is a usage error" 3 'give the dump files' ./llrdma-hint recommend
run "recommend: unknown option" 3 "unknown option '--bogus'" ./llrdma-hint recommend --bogus "$tmp/job"

# llrdma-check --stats: the same dumps, rank by rank (no mpirun).
run "check --stats: per-rank totals" 0 '^rank 3 on h3 \(pid 1003, hint 64K\): ll 1000 fragments .* 40 waits; bw 0 fragments' \
  ./llrdma-check --stats "$tmp/job"
run "check --stats: buckets" 0 '^  \(2K, 4K\] +500 +0 +0$' ./llrdma-check --stats "$tmp/job/llrdma-0.json"
run "check --stats: truncated dump" 2 'llrdma-check: .*trunc.json:1: not valid JSON' \
  ./llrdma-check --stats "$tmp/trunc.json"
# llrdma-run --hint auto:dump=DIR takes the recommendation (commands only).
export LLRDMA_BINDIR=$PWD
run "llrdma-run --hint auto:dump=DIR" 0 'btl_llrdma_size_hint 4096 .*\./app' \
  ./llrdma-run --dry-run --hint "auto:dump=$tmp/job" -np 4 -- ./app
run "llrdma-run --hint auto:dump=DIR: no hint is 0" 0 'btl_llrdma_size_hint 0 .*\./app' \
  ./llrdma-run --dry-run --hint "auto:dump=$tmp/bimodal.json" -np 4 -- ./app
run "llrdma-run --hint auto:dump=DIR: no traffic" 64 'counted no btl/llrdma traffic' \
  ./llrdma-run --dry-run --hint "auto:dump=$tmp/empty.json" -np 4 -- ./app
run "llrdma-run --hint auto:dump=DIR: bad dump" 64 'trunc.json:1: not valid JSON.*|recommend failed' \
  ./llrdma-run --dry-run --hint "auto:dump=$tmp/trunc.json" -np 4 -- ./app
echo "1..$n"
exit $fail

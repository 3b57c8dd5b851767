#!/usr/bin/env bash
# llrdma-bench: pingpong, bw, bibw, allreduce and the two drivers (sweep,
# allreduce-compare) with tiny iteration counts, plus its error handling.
# Every check of a run requires exit status 0 and no FAIL line (env.sh:
# check_run); --verify runs also no rank's own "--verify:" mismatch line (each
# rank prints it before llrdma-bench reduces the verdict with MPI_Allreduce).
. ./tests/mpi/env.sh
BENCH="$top_builddir/llrdma-bench"
T="$LLRDMA_TEST_HOME"

# Table rows of pingpong/allreduce: "<n> B|KB|MB ..." (the size label has a blank).
rows() { grep -E '^ *[0-9]+ (B|KB|MB) ' <<<"$out"; }
# verified LINE: LINE printed and no rank printed a --verify mismatch.
verified() { lacks "rank [0-9]*: --verify:" && has "$1"; }
# rows_ok AWK-CONDITION-FOR-A-BAD-ROW: every table row passes.
rows_ok() { rows | awk "{ if ($1) bad = 1 } END { exit bad }"; }
# csv_ok FILE HEADER-PREFIX LINES: FILE has LINES lines, the first starting HEADER-PREFIX.
csv_ok() { [ -f "$1" ] && [ "$(head -1 "$1" | cut -c1-${#2})" = "$2" ] && [ "$(wc -l <"$1")" -eq "$3" ]; }

capture "$BENCH" selftest
check_run "selftest (percentiles, size lists, argument splitting)" true

# ---------------------------------------------------------------- pingpong
launch -np 2 --mca btl_llrdma_size_hint 1K "$BENCH" pingpong --warmup 5 --iters 50 \
  --sizes 8,256,4K --around-hint
check "pingpong: exit 0 (exit $rc)" test $rc -eq 0
header() { has "ROUND TRIP" && grep -qE "^ +size +iters +P50 +P90 +P99 " <<<"$out"; }
check_run "pingpong: header says round trip, columns P50 and P99" header
check_run "pingpong: 6 sizes (8, 256, 4K and hint-1, hint, hint+1)" test "$(rows | wc -l)" -eq 6
around() { grep -qE "^ +1023 B " <<<"$out" && grep -qE "^ +1025 B " <<<"$out"; }
check_run "pingpong: 1023 B and 1025 B measured" around
check_run "pingpong: every P50..mean > 0 and P50 <= P99 <= max" \
  rows_ok '$3 != 50 || $4 <= 0 || $5 <= 0 || $6 <= 0 || $7 <= 0 || $8 <= 0 || $9 <= 0 || $4 > $6 || $6 > $8'
check_run "pingpong: each rank's hint and source reported" \
  count '^# rank[01] host=.* size_hint=1024 source=env' 2
check_run "pingpong: transport reported (ob1 and its BTLs)" \
  has '^# transport rank0 -> rank1: pml=ob1 btl eager='

launch -np 2 "$BENCH" pingpong --warmup 2 --iters 20 --sizes 1,7,4K,100000 --verify \
  --rate --windows 10 --window 8
check_run "pingpong --verify --rate: exit 0, payloads correct" verified "verify: all payloads correct"
check_run "pingpong --rate: msgs/s column > 0" rows_ok '$11 + 0 <= 0'

launch -np 2 "$BENCH" pingpong --iters 5 --warmup 0 --max 64 --csv "$T/pp.csv"
check_run "pingpong --csv FILE: header + 4 rows (8..64)" csv_ok "$T/pp.csv" \
  "hint,size,iters,p50_us,p90_us,p99_us,p999_us,max_us,mean_us,min_us,bw_MBps,rate_msgs_s,stream_MBps" 5

launch -np 1 "$BENCH" pingpong --iters 5
check "pingpong on 1 rank: exit 3 (exit $rc)" test $rc -eq 3
check "pingpong on 1 rank: says it needs 2 ranks" has "launch with mpirun -np 2"

# ---------------------------------------------------------------- bw, bibw
# Rows: "<size label> window iters MB/s msgs/s".
launch -np 2 --mca btl_llrdma_size_hint 1K "$BENCH" bw --sizes 1,4K,100000,hint --window 8 \
  --iters 5 --warmup 1 --verify
check_run "bw --verify: exit 0, every message of every window correct" \
  verified "verify: every message of every window correct"
bw_header() { has "^# llrdma-bench bw: rank 0 -> rank 1, windows of 8 MPI_Isend" &&
  grep -qE "^ +size +window +iters +MB/s +msgs/s$" <<<"$out"; }
check_run "bw: header (one direction, osu_bw) and columns" bw_header
check_run "bw: 4 sizes (1, 1024 = hint, 4K, 100000), window 8, 5 windows, rates > 0" \
  test "$(rows | awk '$3 == 8 && $4 == 5 && $6 > 0 && ($2 == "B" || $5 > 0)' | wc -l)" -eq 4
check_run "bw: transport and each rank's hint reported" \
  count '^# rank[01] host=.* size_hint=1024 source=env' 2
# --window-bytes: 128K caps the window at 2 x 64K; --budget 256K: 2 windows of 2 x 64K
launch -np 2 "$BENCH" bw --sizes 1K,64K --window 8 --window-bytes 128K --iters 10 \
  --min-iters 1 --budget 256K --warmup 0 --csv "$T/bw.csv"
# The chart's fixture has the format bw writes (llrdma-bench plot, tests/tools/test-plot.sh).
bw_csv() {
  csv_ok "$T/bw.csv" "$(head -1 "$top_srcdir/tests/tools/fixtures/bw.csv")" 3 &&
    grep -qE '^0,1024,8,10,[0-9.]+,[0-9.]+$' "$T/bw.csv" && grep -qE '^0,65536,2,2,[0-9.]+,[0-9.]+$' "$T/bw.csv"
}
check_run "bw --window-bytes --budget --csv: the plot fixture's header; windows 8 x 10 and 2 x 2" bw_csv
if command -v "${LLRDMA_GNUPLOT:-gnuplot}" >/dev/null; then
  capture "$BENCH" plot --out "$T/bw.png" "$T/bw.csv"
  check "plot of bw's CSV: exit 0 and a PNG (exit $rc)" test $rc -eq 0 -a -s "$T/bw.png"
else
  skip "plot of bw's CSV" "gnuplot not installed"
fi
launch -np 2 "$BENCH" bibw --sizes 1,7,65537 --window 4 --iters 3 --warmup 1 --verify --csv -
check_run "bibw --verify: exit 0, every message correct" \
  verified "verify: every message of every window correct"
bibw_csv() { has "^# llrdma-bench bibw: ranks 0 <-> 1, both directions" &&
  [ "$(grep -cE '^0,(1|7|65537),4,3,[0-9.]+,[0-9.]+$' <<<"$out")" -eq 3 ] && [ -z "$(rows)" ]; }
check_run "bibw --csv -: 3 CSV rows on stdout (window 4, 3 windows), no table" bibw_csv

# --verify checks every message: a shim (tests/mpi/corrupt_recv.c) inverts the
# last byte of one received message; the receiving rank must find it and exit 1.
shim="$top_builddir/tests/mpi/.libs/libcorruptrecv.so"
real="$top_builddir/.libs/llrdma-bench" # not the libtool wrapper: no shim in its shell
[ -x "$real" ] || real=$BENCH
# 1 warm-up + 3 measured windows of 4: receive 11 is message 2 of window 2.
launch -np 2 -x LD_PRELOAD="$shim" -x LLRDMA_TEST_CORRUPT_NTH=11 "$real" bw --sizes 4K \
  --window 4 --iters 3 --warmup 1 --verify
check "bw --verify, message 2 of window 2 damaged: exit 1 (exit $rc)" test $rc -eq 1
check "bw --verify, damaged message: rank 1 names it, last byte" \
  has "bw: rank 1: --verify: message 2 of window 2 (4096 bytes from rank 0): byte 4095"
check "bw --verify, damaged message: rank 0's summary says FAILED" has "verify: FAILED"
launch -np 2 -x LD_PRELOAD="$shim" -x LLRDMA_TEST_CORRUPT_NTH=11 "$real" bw --sizes 4K \
  --window 4 --iters 3 --warmup 1
check "bw without --verify, same damage: exit 0 (the shim alone fails nothing) (exit $rc)" \
  test $rc -eq 0
# bibw: rank 0 receives too; its 8th receive is message 3 of window 1 (1 B).
launch -np 2 -x LD_PRELOAD="$shim" -x LLRDMA_TEST_CORRUPT_NTH=8 -x LLRDMA_TEST_CORRUPT_RANK=0 \
  "$real" bibw --sizes 1,64K --window 4 --iters 3 --warmup 1 --verify
check "bibw --verify, a message to rank 0 damaged: exit 1 (exit $rc)" test $rc -eq 1
check "bibw --verify, damaged message: rank 0 names it" \
  has "bibw: rank 0: --verify: message 3 of window 1 (1 bytes from rank 1): byte 0"

for n in 1 3; do
  launch -np $n "$BENCH" bw --sizes 8 --iters 2
  check "bw on $n rank(s): exit 3 (exit $rc)" test $rc -eq 3
  check "bw on $n rank(s): says it needs exactly 2 ranks" has "needs exactly 2 ranks"
done
launch -np 2 "$BENCH" bw --verify --window 4096 --sizes 1M
check "bw --verify with window x size over 2 GiB: exit 2 (exit $rc)" test $rc -eq 2
check "bw --verify with window x size over 2 GiB: says what to lower" has "lower --window"

# ---------------------------------------------------------------- sweep
capture "$BENCH" sweep --hints 0,8K --csv "$T/sweep.csv" -- --warmup 2 --iters 20
check "sweep: exit 0 (exit $rc)" test $rc -eq 0
latency_table() {
  local t; t=$(sed -n "/^Round-trip latency P50/,/^$/p" <<<"$out")
  grep -qE "^ +size +hint 0 +hint 8 KB$" <<<"$t" &&
    [ "$(grep -cE "^ +[0-9]+ (B|KB) +[0-9.]+ +[0-9.]+$" <<<"$t")" -eq 7 ]
}
check_run "sweep: latency-by-hint table, 7 report sizes x 2 hints" latency_table
percentiles() {
  grep -qE "^setting +8 B P50 +8 B P99 +62 KB P50 +62 KB P99" <<<"$out" &&
    grep -qE "^hint 0( +[0-9.]+){4}$" <<<"$out" && grep -qE "^hint 8 KB( +[0-9.]+){4}$" <<<"$out"
}
check_run "sweep: percentile table with 8 B and 62 KB P50/P99 per hint" percentiles
check_run "sweep: cliff ratio hint+1 / hint for 8K" has '^  hint 8 KB \+8193 B .* = [0-9.]\+'
check_run "sweep: tail ratios P99/P50 up to 4x hint" has '^  hint 8 KB \+(sizes <= 32 KB):.*worst'
hints_reported() {
  has "^# \[hint 0\] rank0 .*size_hint=0 " && has "^# \[hint 8 KB\] rank0 .*size_hint=8192 source=env"
}
check_run "sweep: each run's rank 0 reports its hint" hints_reported
# 8 sizes (8 256 1K 4K 8K 16K 62K 64K) + for 8K: 8191 8193 -> 8 + 10 rows + header
sweep_csv() {
  csv_ok "$T/sweep.csv" "hint,size,iters,p50_us" 19 && [ "$(grep -c "^8192," "$T/sweep.csv")" -eq 10 ] &&
    [ "$(grep -c "^0," "$T/sweep.csv")" -eq 8 ]
}
check_run "sweep --csv: header + 18 rows" sweep_csv

# ---------------------------------------------------------------- allreduce
# --verify checks every call: 10 sizes x (20 timed + 2 warm-up).
ar_checked="checked: every call of every size, 200 timed (the iters column) + 20 warm-up, \
inputs varied per iteration (rank, iteration, element), all elements compared with the exact result"
for n in 2 4; do
  launch -np $n "$BENCH" allreduce --max 4K --warmup 2 --iters 20 --verify
  check_run "allreduce $n ranks: exit 0, every call's result verified" \
    verified "^# --verify: all results correct; $ar_checked\$"
  check_run "allreduce $n ranks --verify: says the filling and checking run between the calls" \
    has "^# with --verify: before each call .* compare these numbers only with other --verify runs"
  ten_rows() { [ "$(rows | wc -l)" -eq 10 ] && rows_ok '$5 + 0 <= 0 || $5 > $7'; }
  check_run "allreduce $n ranks: 10 sizes 8 B..4 KB, P50 > 0, P50 <= P99" ten_rows
  check_run "allreduce $n ranks: reports the coll component serving it" \
    has '^# allreduce served by: coll/[a-z]'
done
launch -np 2 "$BENCH" allreduce --sizes 12,1M --dtype int --op max --iters 20 --min-iters 4 \
  --budget 4M --verify
budget() {
  verified "verify: all results correct" && grep -qE "^ +12 B +3 +20 " <<<"$out" &&
    grep -qE "^ +1 MB +262144 +4 " <<<"$out"
}
check_run "allreduce int max: byte budget gives 4 iterations at 1 MB, 20 at 12 B" budget
launch -np 2 "$BENCH" allreduce --sizes 1M --iters 3 --warmup 1 --rss
check_run "allreduce --rss: exit 0, the peak and what the calls added, in MB" \
  has "^# --rss: peak RSS [0-9.]* MB, [-0-9.]* MB more than with the buffers touched"

# --paired: a duplicate with info llrdma_allreduce=false, which coll/llrdma
# hands to the module below; both results verified, both timed per iteration.
# Verbose 5, not 10: the per-call plan lines of 10 flood mpirun's output, whose
# forwarding splices the two ranks' lines mid-line (CI lost one "for good" line).
launch -np 2 --mca coll_llrdma_verbose 5 "$BENCH" allreduce --paired --sizes 8,4K --warmup 2 \
  --iters 20 --verify --csv "$T/paired.csv"
paired() {
  verified "verify: all results correct" && has '^# --paired: .* served by: coll/[a-z]' &&
    grep -qE '^ +size +count +iters +P50 +P99 +prev P50 +prev P99 +ratio +paired$' <<<"$out" &&
    [ "$(rows | wc -l)" -eq 2 ] && rows_ok 'NF != 10 || $5 <= 0 || $7 <= 0 || $9 <= 0 || $10 <= 0' &&
    count "Allreduce handed to the previous module (.*) for good" 2 &&
    csv_ok "$T/paired.csv" "ranks,hint,size,count,iters,p50_us" 3 &&
    head -1 "$T/paired.csv" | grep -q ',prev_p50_us,prev_p99_us,ratio_p50,ratio_paired$'
}
check_run "allreduce --paired: the duplicate declined once per rank, both sides timed and verified" \
  paired
check_run "allreduce --paired --verify: every call of both sides checked (40 timed + 4 warm-up each)" \
  has "^# --verify: all results correct; checked: every call of every size, 40 timed (the iters column) + 4 warm-up on each side of --paired,"

# --verify can fail: test hooks of llrdma-bench (tools/bench_allreduce.c,
# parse_hook) damage one call on one rank; the verdict is the exit status.
# LLRDMA_BENCH_TEST_CORRUPT=RANK:SIZE:ITER:ELEM[:prev] adds 1 to one element
# of one result.  2 ranks, sum: element 3 of iteration 5 is 3 + 2 x ((3 + 7 x 5)
# mod 1021) = 79; iterations 0-1 are the warm-up, so 5 is timed call 3.
# "$real": the binary, set above for the bw shim.
launch -np 2 -x LLRDMA_BENCH_TEST_CORRUPT=1:4096:5:3 "$real" allreduce --sizes 8,4K,64K \
  --warmup 2 --iters 20 --verify
check "allreduce --verify, element 3 of call 5 at 4 KB damaged on rank 1: exit 1 (exit $rc)" \
  test $rc -eq 1
check "allreduce --verify, damaged element: rank 1 names size, iteration, element, got, expected" \
  has "allreduce: rank 1: --verify: size 4096 iteration 5 (timed call 3): element 3 is 80, expected 79 (1 of 512 elements wrong)$"
check "allreduce --verify, damaged element: counted for the size, no other rank or size wrong" \
  count "rank [0-9]*: --verify:" 2
check "allreduce --verify, damaged element: rank 0's summary says FAILED" \
  has "^# --verify: FAILED: 1 wrong element(s) on all ranks"
launch -np 2 -x LLRDMA_BENCH_TEST_CORRUPT=1:4096:5:3 "$real" allreduce --sizes 4K --warmup 2 \
  --iters 20
check "allreduce without --verify, same damage: exit 0 (the hook alone fails nothing) (exit $rc)" \
  test $rc -eq 0
# LLRDMA_BENCH_TEST_STALE=RANK:SIZE:ITER: rank 2 keeps call 6's input for call
# 7, so every element of call 7 is wrong on every rank (inputs vary per call).
# Each rank's report is one write (llrdma-bench line-buffers stderr): whole
# lines under Debian 13's glibc too, where another rank's landed inside one.
launch -np 3 -x LLRDMA_BENCH_TEST_STALE=2:64:7 "$real" allreduce --sizes 64 --dtype float \
  --warmup 2 --iters 20 --verify
check "allreduce --verify, one rank's input not refilled for call 7: exit 1 (exit $rc)" \
  test $rc -eq 1
check "allreduce --verify, stale input: all 16 elements of call 7 wrong on each of 3 ranks" \
  count "rank [012]: --verify: size 64 iteration 7 (timed call 5): element 0 is 146, expected 153 (16 of 16 elements wrong)$" 3
# --paired: the duplicate's result is checked too (rank 0, its first warm-up call).
launch -np 2 -x LLRDMA_BENCH_TEST_CORRUPT=0:8:0:0:prev "$real" allreduce --paired --sizes 8,4K \
  --dtype int --op max --warmup 2 --iters 20 --verify
check "allreduce --paired --verify, the duplicate's result damaged: exit 1 (exit $rc)" \
  test $rc -eq 1
check "allreduce --paired --verify, damaged duplicate: rank 0 names it" \
  has "rank 0: --verify: size 8 iteration 0 (warm-up) on the --paired duplicate: element 0 is 3, expected 2 "

# --device: a skip only where the prerequisite may be missing: exit 4 when
# this build has no CUDA, exit 3 when CUDA is built but nvidia-smi lists no GPU.
launch -np 2 "$BENCH" allreduce --device --staging-baseline --max 64 --iters 2
d="allreduce --device: runs on the GPU, staged baseline too"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ $rc -eq 4 ] && [ -z "$LLRDMA_CUDA_DIR" ] && has "built without CUDA"; then
  skip "$d" "llrdma-bench built without CUDA (configure found no CUDA Toolkit)"
elif [ $rc -eq 3 ] && [ -n "$LLRDMA_CUDA_DIR" ] && [ "$gpus" -eq 0 ] && has "no usable CUDA device"; then
  skip "$d" "no GPU (nvidia-smi lists none)"
else
  check_run "$d (CUDA: ${LLRDMA_CUDA_DIR:-none}, GPUs: $gpus)" has "staged through pinned host"
fi

# ---------------------------------------------------------------- allreduce-compare
capture "$BENCH" allreduce-compare --colls tuned,basic --np 2 --csv "$T/cmp.csv" -- --max 1K \
  --warmup 1 --iters 10
check "allreduce-compare: exit 0 (exit $rc)" test $rc -eq 0
check_run "allreduce-compare: one table, P50 per component, ratio, P99s" \
  grep -qE '^ +size +tuned P50 +basic P50 +tuned/best +tuned P99 +basic P99$' <<<"$out"
check_run "allreduce-compare: 8 rows of 5 numbers" \
  test "$(grep -cE '^ +[0-9]+ (B|KB)( +[0-9.]+){5}$' <<<"$out")" -eq 8
served() {
  has "^# \[tuned\] allreduce served by: coll/tuned" && has "^# \[basic\] allreduce served by: coll/basic"
}
check_run "allreduce-compare: each run served by the component asked for" served
cmp_csv() { csv_ok "$T/cmp.csv" "coll,ranks,hint,size" 17 && [ "$(grep -c "^basic,2," "$T/cmp.csv")" -eq 8 ]; }
check_run "allreduce-compare --csv: header + 16 rows with the coll column" cmp_csv

# ---------------------------------------------------------------- errors
bad() { # DESCRIPTION EXPECTED-RC PATTERN COMMAND...
  local d=$1 want=$2 pat=$3; shift 3
  capture "$@"
  if [ $rc -eq "$want" ] && grep -qF -- "$pat" <<<"$out"; then ok "$d"; else
    not_ok "$d (exit $rc)"; show_out; fi
}
bad "pingpong --iters abc: exit 2 naming option and value" 2 "--iters 'abc'" \
  "$BENCH" pingpong --iters abc
bad "pingpong --sizes 8,16X: exit 2" 2 "--sizes: '16X'" "$BENCH" pingpong --sizes 8,16X
bad "pingpong unknown option" 2 "unknown option '--bogus'" "$BENCH" pingpong --bogus
bad "bw --window 0: exit 2" 2 "--window '0'" "$BENCH" bw --window 0
bad "bibw --window-bytes 1X: exit 2" 2 "'1X'" "$BENCH" bibw --window-bytes 1X
bad "bw --budget 0: exit 2" 2 "--budget '0'" "$BENCH" bw --budget 0
bad "bw --sizes with --min: exit 2" 2 "exclude each other" "$BENCH" bw --sizes 8 --min 8
bad "bibw unknown option" 2 "bibw: unknown option '--rate'" "$BENCH" bibw --rate
bad "allreduce --dtype complex" 2 "--dtype 'complex'" "$BENCH" allreduce --dtype complex
bad "allreduce --staging-baseline without --device" 2 "needs --device" \
  "$BENCH" allreduce --staging-baseline
bad "sweep --hints 8X" 2 "--hints '0,8X'" "$BENCH" sweep --hints 0,8X
bad "sweep: pingpong option before '--'" 2 "go after '--'" "$BENCH" sweep --iters 5
bad "sweep: --csv after '--'" 2 "own --csv" "$BENCH" sweep -- --csv x
bad "allreduce-compare --colls with a bad name" 2 "'Tuned!'" \
  "$BENCH" allreduce-compare --colls Tuned!
bad "unknown mode" 2 "unknown mode 'pingping'" "$BENCH" pingping
launch -np 2 "$BENCH" pingpong --warmup -5
check "bad option under mpirun: non-zero (exit $rc)" test $rc -ne 0 -a $rc -ne 124 -a $rc -ne 137
check "bad option under mpirun: the message once" count "warmup '-5'" 1
LLRDMA_MPIRUN=/nonexistent/mpirun capture "$BENCH" sweep --hints 0 -- --iters 1
check "sweep with a missing mpirun: exit 3 (exit $rc)" test $rc -eq 3
check "sweep with a missing mpirun: names LLRDMA_MPIRUN" has "LLRDMA_MPIRUN"
capture "$BENCH" --help
check_run "--help: man-style, documents exit status" has "^EXIT STATUS"
capture "$BENCH" pingpong --help
check_run "pingpong --help: documents round trips" has "ROUND TRIP"
capture "$BENCH" bw --help
check_run "bw --help: documents the window and --window-bytes" has "^    --window-bytes S"
capture "$BENCH" allreduce --help
check_run "allreduce --help: --verify's filling and checking run between the calls" \
  has "numbers.  Without it the input is written once"
finish

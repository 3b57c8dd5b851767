#!/usr/bin/env bash
# llrdma-bench: pingpong, allreduce and the two drivers (sweep,
# allreduce-compare) with tiny iteration counts, plus its error handling.
. ./tests/mpi/env.sh
BENCH="$top_builddir/llrdma-bench"
T="$LLRDMA_TEST_HOME"

show() { sed 's/^/# /' <<<"$1" | tail -${2:-25}; }
# Table rows of pingpong/allreduce: "<n> B|KB|MB ..." (the size label has a blank).
rows() { grep -E '^ *[0-9]+ (B|KB|MB) ' <<<"$1"; }

check "selftest (percentiles, size lists, argument splitting)" "$BENCH" selftest

# ---------------------------------------------------------------- pingpong
rc=0; out=$(mpi -np 2 --mca btl_llrdma_size_hint 1K "$BENCH" pingpong --warmup 5 --iters 50 \
  --sizes 8,256,4K --around-hint 2>&1) || rc=$?
check "pingpong: exit 0" test $rc -eq 0
check "pingpong: header says round trip, columns P50 and P99" \
  bash -c 'grep -q "ROUND TRIP" <<<"$0" && grep -qE "^ +size +iters +P50 +P90 +P99 " <<<"$0"' "$out"
check "pingpong: 6 sizes (8, 256, 4K and hint-1, hint, hint+1)" test "$(rows "$out" | wc -l)" -eq 6
check "pingpong: 1023 B and 1025 B measured" \
  bash -c 'grep -qE "^ +1023 B " <<<"$0" && grep -qE "^ +1025 B " <<<"$0"' "$out"
check "pingpong: every P50..mean > 0 and P50 <= P99 <= max" \
  bash -c 'rows() { grep -E "^ *[0-9]+ (B|KB|MB) " <<<"$1"; }
           rows "$0" | awk "{ if (\$3 != 50) bad = 1;
             for (i = 4; i <= 9; ++i) if (\$i + 0 <= 0) bad = 1;
             if (\$4 > \$6 || \$6 > \$8) bad = 1 } END { exit bad }"' "$out"
check "pingpong: each rank's hint and source reported" \
  test "$(grep -c '^# rank[01] host=.* size_hint=1024 source=env' <<<"$out")" -eq 2
check "pingpong: transport reported (ob1 and its BTLs)" \
  grep -q '^# transport rank0 -> rank1: pml=ob1 btl eager=' <<<"$out"
[ $rc -eq 0 ] || show "$out"

rc=0; out=$(mpi -np 2 "$BENCH" pingpong --warmup 2 --iters 20 --sizes 1,7,4K,100000 --verify \
  --rate --windows 10 --window 8 2>&1) || rc=$?
check "pingpong --verify --rate: exit 0, payloads correct" \
  bash -c '[ $1 -eq 0 ] && grep -q "verify: all payloads correct" <<<"$0"' "$out" $rc
check "pingpong --rate: msgs/s column > 0" \
  bash -c 'grep -E "^ *[0-9]+ (B|KB|MB) " <<<"$0" | awk "{ if (\$11 + 0 <= 0) bad = 1 } END { exit bad }"' "$out"
[ $rc -eq 0 ] || show "$out"

rc=0; out=$(mpi -np 2 "$BENCH" pingpong --iters 5 --warmup 0 --max 64 --csv "$T/pp.csv" 2>&1) || rc=$?
check "pingpong --csv FILE: header + 4 rows (8..64)" \
  bash -c '[ $0 -eq 0 ] && [ "$(head -1 "$1")" = "hint,size,iters,p50_us,p90_us,p99_us,p999_us,max_us,mean_us,min_us,bw_MBps,rate_msgs_s,stream_MBps" ] && [ $(wc -l <"$1") -eq 5 ]' \
  $rc "$T/pp.csv"

rc=0; out=$(mpi -np 1 "$BENCH" pingpong --iters 5 2>&1) || rc=$?
check "pingpong on 1 rank: exit 3, says it needs 2 ranks" \
  bash -c '[ $1 -eq 3 ] && grep -q "launch with mpirun -np 2" <<<"$0"' "$out" $rc

# ---------------------------------------------------------------- sweep
rc=0; out=$("$BENCH" sweep --hints 0,8K --csv "$T/sweep.csv" -- --warmup 2 --iters 20 2>&1) || rc=$?
check "sweep: exit 0" test $rc -eq 0
check "sweep: latency-by-hint table, 7 report sizes x 2 hints" \
  bash -c 'sed -n "/^Round-trip latency P50/,/^$/p" <<<"$0" | grep -qE "^ +size +hint 0 +hint 8 KB$" &&
           [ $(sed -n "/^Round-trip latency P50/,/^$/p" <<<"$0" | grep -cE "^ +[0-9]+ (B|KB) +[0-9.]+ +[0-9.]+$") -eq 7 ]' "$out"
check "sweep: percentile table with 8 B and 62 KB P50/P99 per hint" \
  bash -c 'grep -qE "^setting +8 B P50 +8 B P99 +62 KB P50 +62 KB P99" <<<"$0" &&
           grep -qE "^hint 0( +[0-9.]+){4}$" <<<"$0" && grep -qE "^hint 8 KB( +[0-9.]+){4}$" <<<"$0"' "$out"
check "sweep: cliff ratio hint+1 / hint for 8K" grep -qE '^  hint 8 KB +8193 B .* = [0-9.]+' <<<"$out"
check "sweep: tail ratios P99/P50 up to 4x hint" grep -qE '^  hint 8 KB +\(sizes <= 32 KB\):.*worst' <<<"$out"
check "sweep: each run's rank 0 reports its hint" \
  bash -c 'grep -q "^# \[hint 0\] rank0 .*size_hint=0 " <<<"$0" && grep -q "^# \[hint 8 KB\] rank0 .*size_hint=8192 source=env" <<<"$0"' "$out"
# 8 sizes (8 256 1K 4K 8K 16K 62K 64K) + for 8K: 8191 8193 -> 8 + 10 rows + header
check "sweep --csv: header + 18 rows" \
  bash -c '[ "$(head -1 "$0" | cut -d, -f1-4)" = "hint,size,iters,p50_us" ] && [ $(wc -l <"$0") -eq 19 ] &&
           [ $(grep -c "^8192," "$0") -eq 10 ] && [ $(grep -c "^0," "$0") -eq 8 ]' "$T/sweep.csv"
[ $rc -eq 0 ] || show "$out" 40

# ---------------------------------------------------------------- allreduce
for n in 2 4; do
  rc=0; out=$(mpi -np $n "$BENCH" allreduce --max 4K --warmup 2 --iters 20 --verify 2>&1) || rc=$?
  check "allreduce $n ranks: exit 0, results verified" \
    bash -c '[ $1 -eq 0 ] && grep -q "verify: all results correct" <<<"$0"' "$out" $rc
  check "allreduce $n ranks: 10 sizes 8 B..4 KB, P50 > 0, P50 <= P99" \
    bash -c '[ $(grep -cE "^ *[0-9]+ (B|KB) " <<<"$0") -eq 10 ] &&
             grep -E "^ *[0-9]+ (B|KB) " <<<"$0" | awk "{ if (\$5 + 0 <= 0 || \$5 > \$7) bad = 1 } END { exit bad }"' "$out"
  check "allreduce $n ranks: reports the coll component serving it" \
    grep -q '^# allreduce served by: coll/[a-z]' <<<"$out"
  [ $rc -eq 0 ] || show "$out"
done
rc=0; out=$(mpi -np 2 "$BENCH" allreduce --sizes 12,1M --dtype int --op max --iters 20 --min-iters 4 \
  --budget 4M --verify 2>&1) || rc=$?
check "allreduce int max: byte budget gives 4 iterations at 1 MB, 20 at 12 B" \
  bash -c '[ $1 -eq 0 ] && grep -qE "^ +12 B +3 +20 " <<<"$0" && grep -qE "^ +1 MB +262144 +4 " <<<"$0"' "$out" $rc
[ $rc -eq 0 ] || show "$out"

rc=0; out=$(mpi -np 2 "$BENCH" allreduce --device --staging-baseline --max 64 --iters 2 2>&1) || rc=$?
check "allreduce --device: runs on a GPU, else a clear error (3: no device, 4: no CUDA)" \
  bash -c 'case $1 in 0) grep -q "staged through pinned host" <<<"$0";;
           3) grep -q "no usable CUDA device" <<<"$0";; 4) grep -q "built without CUDA" <<<"$0";;
           *) false;; esac' "$out" $rc

# ---------------------------------------------------------------- allreduce-compare
rc=0; out=$("$BENCH" allreduce-compare --colls tuned,basic --np 2 --csv "$T/cmp.csv" -- --max 1K \
  --warmup 1 --iters 10 2>&1) || rc=$?
check "allreduce-compare: exit 0" test $rc -eq 0
check "allreduce-compare: one table, P50 per component, ratio, P99s" \
  grep -qE '^ +size +tuned P50 +basic P50 +tuned/best +tuned P99 +basic P99$' <<<"$out"
check "allreduce-compare: 8 rows of 5 numbers" \
  test "$(grep -cE '^ +[0-9]+ (B|KB)( +[0-9.]+){5}$' <<<"$out")" -eq 8
check "allreduce-compare: each run served by the component asked for" \
  bash -c 'grep -q "^# \[tuned\] allreduce served by: coll/tuned" <<<"$0" &&
           grep -q "^# \[basic\] allreduce served by: coll/basic" <<<"$0"' "$out"
check "allreduce-compare --csv: header + 16 rows with the coll column" \
  bash -c '[ "$(head -1 "$0" | cut -d, -f1-4)" = "coll,ranks,hint,size" ] && [ $(wc -l <"$0") -eq 17 ] &&
           [ $(grep -c "^basic,2," "$0") -eq 8 ]' "$T/cmp.csv"
[ $rc -eq 0 ] || show "$out" 40

# ---------------------------------------------------------------- errors
bad() { # DESCRIPTION EXPECTED-RC PATTERN COMMAND...
  local d=$1 want=$2 pat=$3 rc=0 out; shift 3
  out=$("$@" 2>&1) || rc=$?
  if [ $rc -eq "$want" ] && grep -qF -- "$pat" <<<"$out"; then ok "$d"; else
    not_ok "$d (exit $rc)"; show "$out" 10; fi
}
bad "pingpong --iters abc: exit 2 naming option and value" 2 "--iters 'abc'" \
  "$BENCH" pingpong --iters abc
bad "pingpong --sizes 8,16X: exit 2" 2 "--sizes: '16X'" "$BENCH" pingpong --sizes 8,16X
bad "pingpong unknown option" 2 "unknown option '--bogus'" "$BENCH" pingpong --bogus
bad "allreduce --dtype complex" 2 "--dtype 'complex'" "$BENCH" allreduce --dtype complex
bad "allreduce --staging-baseline without --device" 2 "needs --device" \
  "$BENCH" allreduce --staging-baseline
bad "sweep --hints 8X" 2 "--hints '0,8X'" "$BENCH" sweep --hints 0,8X
bad "sweep: pingpong option before '--'" 2 "go after '--'" "$BENCH" sweep --iters 5
bad "sweep: --csv after '--'" 2 "own --csv" "$BENCH" sweep -- --csv x
bad "allreduce-compare --colls with a bad name" 2 "'Tuned!'" \
  "$BENCH" allreduce-compare --colls Tuned!
bad "unknown mode" 2 "unknown mode 'pingping'" "$BENCH" pingping
rc=0; out=$(mpi -np 2 "$BENCH" pingpong --warmup -5 2>&1) || rc=$?
check "bad option under mpirun: non-zero, the message once" \
  bash -c '[ $1 -ne 0 ] && [ $(grep -c "warmup '"'"'-5'"'"'" <<<"$0") -eq 1 ]' "$out" $rc
rc=0; out=$(LLRDMA_MPIRUN=/nonexistent/mpirun "$BENCH" sweep --hints 0 -- --iters 1 2>&1) || rc=$?
check "sweep with a missing mpirun: exit 3, names LLRDMA_MPIRUN" \
  bash -c '[ $1 -eq 3 ] && grep -q "LLRDMA_MPIRUN" <<<"$0"' "$out" $rc
check "--help: man-style, documents exit status and round trips" \
  bash -c '"$0" --help | grep -q "^EXIT STATUS" && "$0" pingpong --help | grep -q "ROUND TRIP"' "$BENCH"
finish

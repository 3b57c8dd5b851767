# shellcheck shell=bash disable=SC2034 # fail: the sourcing test exits with it
# TAP helpers of the tools tests (sourced): a scratch directory removed on
# exit, the test count n and the verdict fail, ok/skip/bad, and run, which
# checks a command's exit status and a line of its output.  bad prints the
# last captured output ($tmp/out) as comments.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
bad() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; sed 's/^/# /' "$tmp/out"; }
# run NAME EXPECTED_RC PATTERN CMD...: exit status and a line of the output.
run() {
  local name=$1 want=$2 pat=$3
  shift 3
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "$tmp/out"; then ok "$name"; else
    echo "# exit $rc (want $want), pattern '$pat'"; bad "$name"; fi
}

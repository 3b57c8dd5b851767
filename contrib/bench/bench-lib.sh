# shellcheck shell=bash
# Shared by the guest benchmark scripts of contrib/bench (sourced, not run).
#
# bench_main SCRIPT [ARGS...]: the usual entry of such a script, which
# defines guest DIR (runs in the guest) and summary DIR (prints the tables):
#   --guest DIR    run guest DIR and exit 0
#   --summary [DIR] print the tables from DIR (default $OUT) and exit
#   anything else  print the script's header (its usage) and exit 2
# With no argument it returns, after writing $OUT/host.txt (date, source
# commit, and the line bench_note prints, if the script defines it).
bench_main() {
  local script=$1 top
  shift
  if [[ ${1:-} == --guest ]]; then
    guest "$2"
    exit 0
  fi
  if [[ ${1:-} == --summary ]]; then
    summary "${2:-$OUT}"
    exit
  fi
  if [[ $# -gt 0 ]]; then
    sed -n '2,/^set -u/p' "$script" | sed '$d; s/^# \{0,1\}//'
    exit 2
  fi
  top=$(cd "$(dirname "$script")/../.." && pwd)
  mkdir -p "$OUT"
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    if git -C "$top" rev-parse --git-dir > /dev/null 2>&1; then
      echo "source: $(git -C "$top" rev-parse --short HEAD)" \
           "($(git -C "$top" status --short -uno | wc -l) modified tracked files)"
    fi
    if declare -F bench_note > /dev/null; then bench_note; fi
  } > "$OUT/host.txt"
  cat "$OUT/host.txt"
}

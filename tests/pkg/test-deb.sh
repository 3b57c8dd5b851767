#!/usr/bin/env bash
# tests/pkg/test-deb.sh PACKAGE.deb: installs llrdma's Debian package, checks
# that Open MPI loads both components from its own directory with no
# mca_base_component_path, that llrdma-check runs from /usr/bin on 2 ranks
# and that the help texts are found, then purges it and checks that none of
# its files is left.  Run by `contrib/bootstrap test-deb`; needs root.
#
# An installed package is loaded by every MPI job on the machine, so by
# default the install happens in a private mount namespace over throw-away
# overlays of /usr, /etc and /var: other jobs never see it, and nothing stays
# even if this test is killed.  Where that cannot be set up (no overlayfs, no
# CAP_SYS_ADMIN), or with LLRDMA_DEB_TEST_SYSTEM=1, it installs on the machine
# itself (a trap purges it on failure): do not run other MPI tests meanwhile.
set -euo pipefail

die() { echo "test-deb: $*" >&2; exit 1; }
self=$(readlink -f "${BASH_SOURCE[0]}")

# ------------------------------------------------------------ isolation
# Inside a new mount namespace: overlay each of /usr, /etc and /var with an
# upper directory under $1, keeping the mounts below them (Docker's
# /etc/hosts and /etc/resolv.conf are bind mounts that an overlay would hide).
overlay_root() {
  local scratch=$1 d m i=0
  for d in /usr /etc /var; do
    local subs=()
    mapfile -t subs < <(findmnt -rn -o TARGET | grep "^$d/" || true)
    mkdir -p "$scratch$d/upper" "$scratch$d/work" "$scratch$d/keep"
    for m in "${subs[@]}"; do
      i=$((i + 1))
      if [ -d "$m" ]; then mkdir "$scratch$d/keep/$i"; else touch "$scratch$d/keep/$i"; fi
      mount --bind "$m" "$scratch$d/keep/$i"
    done
    mount -t overlay overlay \
      -o "lowerdir=$d,upperdir=$scratch$d/upper,workdir=$scratch$d/work" "$d"
    i=$((i - ${#subs[@]}))
    for m in "${subs[@]}"; do
      i=$((i + 1))
      mount --bind "$scratch$d/keep/$i" "$m"
    done
  done
}

inside=0
if [ "${1:-}" = --in-namespace ]; then
  overlay_root "$2"
  inside=1
  shift 2
fi
[ $# -eq 1 ] && [ -f "$1" ] || die "usage: $0 PACKAGE.deb"
[ "$(id -u)" = 0 ] || die "needs root (dpkg)"
deb=$(readlink -f "$1")
pkg=$(dpkg-deb -f "$deb" Package)

if [ "${LLRDMA_DEB_TEST_SYSTEM:-0}" != 1 ] && [ $inside = 0 ]; then
  if unshare -m --propagation private true 2>/dev/null && grep -qw overlay /proc/filesystems; then
    echo "# installing in a private overlay of /usr, /etc and /var (the machine is not changed)"
    scratch=$(mktemp -d /tmp/llrdma-deb-root.XXXXXX)
    rc=0
    unshare -m --propagation private "$self" --in-namespace "$scratch" "$deb" || rc=$?
    # The overlays went with the namespace; only their upper directories remain.
    rm -rf "$scratch"
    exit $rc
  fi
  echo "# no private mount namespace with overlayfs here: installing on the machine itself"
fi

# ------------------------------------------------------------ the test
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
has() { grep -q -- "$1" <<<"$out"; }

dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" &&
  die "$pkg is already installed here: purge it first (dpkg --purge $pkg)"
home=$(mktemp -d /tmp/llrdma-deb-test.XXXXXX)
installed=0
cleanup() {
  [ $installed = 1 ] && dpkg --purge "$pkg" >/dev/null 2>&1
  rm -rf "$home"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# No user settings or inherited MCA variables: the package alone must do.
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LLRDMA_HELPDIR LD_LIBRARY_PATH RDMA_LOW_LATENCY_HINT
export HOME=$home TMPDIR=$home
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh

check "dpkg -i $(basename "$deb")" dpkg -i "$deb"
installed=1
mapfile -t files < <(dpkg -L "$pkg")

compdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
for c in btl coll; do
  check "mca_${c}_llrdma.so in Open MPI's component directory $compdir" \
    test -f "$compdir/mca_${c}_llrdma.so"
done
out=$(ompi_info 2>&1)
check "ompi_info lists MCA btl: llrdma with no component path" has "MCA btl: llrdma "
check "ompi_info lists MCA coll: llrdma with no component path" has "MCA coll: llrdma "
check "llrdma-check is /usr/bin/llrdma-check" test "$(command -v llrdma-check)" = /usr/bin/llrdma-check

# Without an RDMA device btl/llrdma says so and Open MPI uses its other BTLs;
# coll/llrdma still reports every rank's configuration.
mpi() { timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe --mca pml ob1 "$@"; }
rc=0
out=$(mpi -np 2 --mca btl_llrdma_size_hint 16K llrdma-check 2>&1) || rc=$?
check "mpirun -np 2 llrdma-check: exit 0 (exit $rc)" test $rc -eq 0
check "llrdma-check: both ranks agree on the hint" has "all 2 ranks agree: size hint 16K"
check "llrdma-check: the Allreduce plan table" has "Allreduce plan for 2 ranks on 1 node"
[ $rc -eq 0 ] || sed 's/^/# /' <<<"$out" | head -n 40
# llrdma-run: its preflight, then the application, same hint.
rc=0
out=$(timeout -k 5 240 llrdma-run --hint 16K --allow-run-as-root --oversubscribe --mca pml ob1 -np 2 \
  -- /bin/echo llrdma-run-app-ran 2>&1) || rc=$?
check "llrdma-run: preflight and application (exit $rc)" \
  bash -c '[ "$1" -eq 0 ] && [ "$(grep -c "^llrdma-run-app-ran" <<<"$2")" -eq 2 ]' _ "$rc" "$out"
[ $rc -eq 0 ] || sed 's/^/# /' <<<"$out" | head -n 40
# The help texts come from /usr/share/llrdma, compiled in: no LLRDMA_HELPDIR.
rc=0
out=$(mpi -np 1 --mca btl_llrdma_size_hint 16X llrdma-check 2>&1) || rc=$?
check "a bad hint stops the job (exit $rc) with the installed help text" \
  bash -c '[ "$1" -ne 0 ] && [ "$1" -ne 124 ] && grep -q "so MPI_Init stops here" <<<"$2"' _ "$rc" "$out"

check "dpkg --purge $pkg" dpkg --purge "$pkg"
installed=0
left=()
for f in "${files[@]}"; do
  [ "$f" = /. ] && continue
  [ -e "$f" ] || continue
  # A directory stays when another package still owns it.
  [ -d "$f" ] && dpkg-query -S "$f" >/dev/null 2>&1 && continue
  left+=("$f")
done
check "purged: none of the package's ${#files[@]} paths left${left[*]:+ (left: ${left[*]})}" \
  test ${#left[@]} -eq 0
out=$(ompi_info 2>&1)
check "ompi_info no longer lists llrdma" bash -c '! grep -q "MCA [a-z]*: llrdma " <<<"$1"' _ "$out"

echo "1..$n"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# User-space instructions per MPI_Allreduce call of rank 0 of 2, by size: the
# program is contrib/bench/ar-avg.c (MPI_DOUBLE sum, the same buffers every
# call, its last result checked), rank 0 under valgrind's callgrind counting
# only inside PMPI_Allreduce.  Each size runs twice, with 1,000 and with
# 6,000 timed calls, and the difference is divided by 5,000: the first call's
# set-up (agreement, arena) cancels out.  Counts do not depend on the load;
# waits do (a rank that waits longer polls more), which is why rank 0, the
# slower one under valgrind, is the one counted.
#   contrib/bench/ar-call-cost.sh PREFIX [SIZES] [COLL]
# PREFIX: an install prefix of llrdma (lib/openmpi) or a build directory
# (.libs); SIZES: comma-separated (default 64,512,1K,4K); COLL: the coll list
# (default llrdma,tuned,basic,libnbc,self; "tuned,basic,libnbc,self" counts
# Open MPI's own).
set -u
p=$(readlink -f "${1:?install prefix or build directory}")
sizes=${2:-64,512,1K,4K}
coll=${3:-llrdma,tuned,basic,libnbc,self}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v valgrind >/dev/null || { echo "ar-call-cost: valgrind missing (apt-get install valgrind)" >&2; exit 2; }
export OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=sh
if [ -d "$p/.libs" ]; then
  export OMPI_MCA_mca_base_component_path="$p/.libs:SYS_DEFAULT" LD_LIBRARY_PATH="$p/.libs"
else
  export OMPI_MCA_mca_base_component_path="$p/lib/openmpi:SYS_DEFAULT" LD_LIBRARY_PATH="$p/lib"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/ar-avg" "$here/ar-avg.c" || exit 1
count() { # SIZE CALLS: rank 0's instructions inside PMPI_Allreduce
  rm -f "$tmp"/cg.*
  timeout 600 mpirun -np 2 --oversubscribe --mca coll "$coll" bash -c \
    '[ "$OMPI_COMM_WORLD_RANK" = 0 ] && exec valgrind --tool=callgrind --callgrind-out-file='"$tmp"'/cg.%p \
       --toggle-collect=PMPI_Allreduce "$0" "$@"; exec "$0" "$@"' \
    "$tmp/ar-avg" --sizes "$1" --iters "$2" --warmup 0 > "$tmp/out" 2>&1 ||
    { echo "ar-call-cost: run failed (size $1, $2 calls)" >&2; tail -5 "$tmp/out" >&2; exit 1; }
  grep -q "correct" "$tmp/out" || { echo "ar-call-cost: no checked result" >&2; cat "$tmp/out" >&2; exit 1; }
  callgrind_annotate "$tmp"/cg.* 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}'
}
echo "| size | Ir per call (rank 0 of 2, $coll) |"
echo "|---|---|"
for s in ${sizes//,/ }; do
  a=$(count "$s" 1000) && b=$(count "$s" 6000) || exit 1
  echo "| $s | $(( (b - a) / 5000 )) |"
done

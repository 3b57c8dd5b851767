#!/usr/bin/env bash
# Repeats one dead-rank run of coll/llrdma's message algorithms over the PML
# (tests/mpi/test-allreduce-faults.sh's case, which runs it once) and counts
# the outcomes: rank 1 kills itself at the start of call 3, the survivors'
# calls 1 and 2 must return the right sums and call 3 must fail within 10 s
# (t_allreduce --die judges each rank).  docs/allreduce.md, "Failures".
#   [DIE_LOOP_MCA="--mca coll_llrdma_shm_liveness_ms 1"] \
#     contrib/bench/die-loop.sh BUILDDIR [RUNS] [NP] [ALG] [COUNT]
# (a short liveness period makes the survivors look while others still run
# call 2: the window where giving up a live peer's messages went wrong)
set -u
b=${1:?usage: die-loop.sh BUILDDIR [RUNS] [NP] [ALG] [COUNT]}
runs=${2:-80} np=${3:-4} alg=${4:-recursive_doubling} count=${5:-1048576}
cd "$b" || exit 2
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_allreduce"
pass=0 fail=0 hung=0
for i in $(seq 1 "$runs"); do
  launch --enable-recovery -np "$np" --mca coll_llrdma_shm 0 ${DIE_LOOP_MCA:-} \
    --mca coll_llrdma_allreduce_algorithm "$alg" "$T" --die 1 3 "$count"
  got=$(grep -c "t_allreduce rank [0-9]*: PASS" <<<"$out")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    hung=$((hung + 1)); echo "run $i: timed out"
  elif [ "$got" -eq $((np - 1)) ] && ! grep -qw FAIL <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "run $i:"; grep -w FAIL <<<"$out" | head -3
  fi
done
echo "die-loop: $np ranks, $alg, $count doubles: $pass of $runs passed, $fail failed, $hung timed out"
[ $((fail + hung)) -eq 0 ]

#!/usr/bin/env bash
# coll/llrdma Allreduce on the Fortran handles (MPI_INTEGER, MPI_REAL,
# MPI_DOUBLE_PRECISION, MPI_LOGICAL*, MPI_2REAL ...), complex types and the
# MPI_AINT family, used from C (t_ftypes.c): results against a reference
# computed without MPI, and proof that coll/llrdma ran each case -- t_ftypes
# prints the plan line every case must produce ("t_ftypes expect: allreduce
# N bytes (TYPE OP)"), with the core type the handle must map to; each has its
# own byte count.  Ops Open MPI rejects on a type (MPI_MAX on complex) fail
# with MPI_ERR_OP and no plan; REAL*16 (no core type) goes to the module below.
. ./tests/mpi/env.sh
T="$top_builddir/tests/mpi/t_ftypes"
V=(--mca coll_llrdma_verbose 10)

# every "expect" line of the last run has its plan line
all_planned() {
  local line n=0 missing=0
  while IFS= read -r line; do
    n=$((n + 1))
    grep -q -- "coll:llrdma: ${line#t_ftypes expect: }" <<<"$out" ||
      { missing=$((missing + 1)); echo "# no plan line: ${line#t_ftypes expect: }"; }
  done < <(grep "^t_ftypes expect: " <<<"$out" | sort -u)
  [ $n -gt 20 ] && [ $missing -eq 0 ]
}

for n in 2 3 5; do
  launch -np $n "${V[@]}" "$T"
  check_pass "$n ranks, planner's choice" t_ftypes $n
  check_run "$n ranks: coll/llrdma ran every Fortran, complex and MPI_AINT case" all_planned
  check_run "$n ranks: no invalid complex op was planned" \
    lacks "coll:llrdma: allreduce .* bytes (.*complex \(max\|min\|land\|maxloc\))"
done
for alg in recursive_doubling rabenseifner ring; do
  launch -np 4 "${V[@]}" --mca coll_llrdma_allreduce_algorithm $alg "$T"
  check_pass "4 ranks, $alg forced" t_ftypes 4
  check_run "4 ranks, $alg ran every case" all_planned
done
launch -np 3 "${V[@]}" --mca coll_llrdma_allreduce_algorithm ring \
  --mca coll_llrdma_allreduce_segment_size 100 "$T"
check_pass "ring with 100-byte segments" t_ftypes 3
launch -np 2 "${V[@]}" "$T"
if has "t_ftypes: MPI_REAL16 sum tried"; then
  check_run "REAL*16 falls back, named with its size" \
    has "allreduce of 5 x MPI_REAL16 (op sum) on .*: no core type of its size (16 bytes)"
else
  skip "REAL*16 falls back, named with its size" "MPI_REAL16 is not 16 bytes in this Open MPI"
fi
finish

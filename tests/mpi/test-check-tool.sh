#!/usr/bin/env bash
# llrdma-check on 1, 2 and 4 ranks.
. ./tests/mpi/env.sh

for n in 1 2 4; do
  rc=0; out=$(mpi -np $n --mca btl_llrdma_size_hint 16K "$CHECK" 2>&1) || rc=$?
  check "$n ranks: exit 0" test $rc -eq 0
  check "$n ranks: verdict line" grep -q "all $n ranks agree: size hint 16K" <<<"$out"
  check "$n ranks: one table row per rank" test "$(grep -cE '^ *[0-9]+  [^ ]+ +[0-9]+ ' <<<"$out")" -eq $n
  # All ranks on this node: the arena's algorithms (the message ones below).
  check "$n ranks: Allreduce plan table for the hint" \
    bash -c 'grep -q "Allreduce plan for '$n' ranks, MPI_DOUBLE, coll hint 16K" <<<"$0" &&
             { [ '$n' -eq 1 ] || { grep -q "shared-memory arena (all ranks on one node)" <<<"$0" &&
                                   grep -qE "^ +64M  shm_split " <<<"$0"; }; }' "$out"
  out=$(mpi -np $n --mca btl_llrdma_size_hint 16K "$CHECK" --json 2>&1)
  check "$n ranks: --json one object per rank with rank/host/size_hint/source" \
    test "$(grep -c '^{"rank":[0-9]*,.*"host":".*"size_hint":16384,.*"source":"env"' <<<"$out")" -eq $n
done
out=$(mpi -np 4 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_shm 0 "$CHECK" 2>&1)
check "arena off: the message algorithms for the hint" \
  bash -c '! grep -q "shared-memory arena" <<<"$0" && grep -qE "^ +64M  rabenseifner " <<<"$0" &&
           grep -qE "^ +4K  recursive_doubling " <<<"$0"' "$out"
empty=$(mktemp -d "$LLRDMA_TEST_HOME/empty.XXXX")
rc=0; out=$(OMPI_MCA_mca_base_component_path="$empty:SYS_DEFAULT" mpi -np 2 "$CHECK" 2>&1) || rc=$?
check "components not loaded: exit 2 with a hint about the component path" \
  bash -c "[ $rc -eq 2 ] && grep -q mca_base_component_path <<<\"\$0\"" "$out"
out=$(mpi -np 2 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_allreduce_algorithm rabenseifner \
      --mca coll_llrdma_size_hint 4K "$CHECK" 2>&1)
check "plan table follows the coll knobs" \
  bash -c 'grep -q "coll hint 4K (algorithm forced)" <<<"$0" && ! grep -qE "^ +[0-9KM]+  (ring|recursive)" <<<"$0"' "$out"
rc=0; "$CHECK" --bogus >/dev/null 2>&1 || rc=$?
check "unknown option: exit 3" test $rc -eq 3
check "--help documents the exit codes" bash -c "'$CHECK' --help | grep -q 'Exit status'"
finish

#!/usr/bin/env bash
# Every source of the hint, its precedence, and what each rank reports.
. ./tests/mpi/env.sh

# jq-free JSON field check: exactly EXPECTED_COUNT lines of $out match PATTERN.
all_lines() { # PATTERN EXPECTED_COUNT
  count "$1" "$2"
}

launch -np 1 "$CHECK" --json
check_run "default: 0, source default" all_lines '"size_hint":0,.*"source":"default"' 1

launch -np 2 --mca btl_llrdma_size_hint 16K "$CHECK" --json
check_run "mpirun --mca 16K reaches both ranks as environment" \
  all_lines '"size_hint":16384,.*"source":"env"' 2

OMPI_MCA_btl_llrdma_size_hint=0x4000 launch -np 4 -x OMPI_MCA_btl_llrdma_size_hint "$CHECK" --json
check_run "-x OMPI_MCA_btl_llrdma_size_hint=0x4000 on 4 ranks" \
  all_lines '"size_hint":16384,.*"source":"env"' 4

mkdir -p "$HOME/.openmpi"
printf '# test\n\nbtl_llrdma_size_hint = 8K\n' > "$HOME/.openmpi/mca-params.conf"
launch -np 2 "$CHECK" --json
if ompi5; then
  # mpirun 5 (PRRTE) reads the parameter files itself and hands their values
  # to the ranks as environment (docs/design.md, "Open MPI 5").
  check_run "\$HOME/.openmpi/mca-params.conf: reaches the ranks as environment (Open MPI 5)" \
    all_lines '"size_hint":8192,.*"source":"env"' 2
  file_src="env"
else
  check_run "\$HOME/.openmpi/mca-params.conf: file source with path and line" \
    all_lines "\"size_hint\":8192,.*\"source\":\"file\",.*$HOME/.openmpi/mca-params.conf:3" 2
  file_src="file"
fi

launch -np 2 --mca btl_llrdma_size_hint 32K "$CHECK" --json
check_run "environment/--mca beats the parameter file" \
  all_lines '"size_hint":32768,.*"source":"env"' 2

RDMA_LOW_LATENCY_HINT=0x1000 launch -np 2 -x RDMA_LOW_LATENCY_HINT "$CHECK" --json
check_run "parameter file beats the RDMA_LOW_LATENCY_HINT alias" \
  all_lines "\"size_hint\":8192,.*\"source\":\"$file_src\"" 2
rm -f "$HOME/.openmpi/mca-params.conf"

RDMA_LOW_LATENCY_HINT=0x1000 launch -np 2 -x RDMA_LOW_LATENCY_HINT "$CHECK" --json
check_run "RDMA_LOW_LATENCY_HINT alone: alias source, hex parsed" \
  all_lines '"size_hint":4096,.*"source":"alias"' 2

RDMA_LOW_LATENCY_HINT=0x1000 launch -np 2 -x RDMA_LOW_LATENCY_HINT \
  --mca btl_llrdma_size_hint 2M "$CHECK" --json
check_run "--mca beats the alias" all_lines '"size_hint":2097152,.*"source":"env"' 2

conf="$LLRDMA_TEST_HOME/site.conf"
printf 'btl_llrdma_size_hint = 64KiB\n' > "$conf"
launch -np 2 --mca mca_base_param_files "$conf" "$CHECK" --json
check_run "mca_base_param_files: file source names that file" \
  all_lines "\"size_hint\":65536,.*\"source\":\"file\",.*$conf:1" 2

launch -np 2 --mca btl_llrdma_size_hint 16K "$TAPI" set 4096
check_pass "llrdma_set_size_hint() before MPI_Init beats --mca" t_api 2

# coll-only override and segment shown in the per-rank configuration.
launch -np 2 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_allreduce_segment_size 4K \
  "$CHECK" --json
check_run "coll segment override shows in the configuration" \
  all_lines '"coll_segment_bytes":4096' 2

# Dump to a per-rank file pattern.
launch -np 2 --mca btl_llrdma_size_hint 16K --mca btl_llrdma_dump "$LLRDMA_TEST_HOME/d-%r.json" \
  "$TRING"
check_pass "btl_llrdma_dump to files: t_ring PASS" t_ring 2
check_run "btl_llrdma_dump writes one JSON file per rank" \
  bash -c "grep -q '\"rank\":0,.*\"size_hint\":16384' '$LLRDMA_TEST_HOME/d-0.json' && grep -q '\"rank\":1,' '$LLRDMA_TEST_HOME/d-1.json'"
launch -np 2 --mca btl_llrdma_dump stderr "$TRING"
check_pass "btl_llrdma_dump=stderr: t_ring PASS" t_ring 2
check_run "btl_llrdma_dump=stderr prints one JSON object per rank" all_lines '^{"rank":' 2
finish

#!/usr/bin/env bash
# Every source of the hint, its precedence, and what each rank reports.
. ./tests/mpi/env.sh

# jq-free JSON field check: field NAME has VALUE on every line of $out.
all_lines() { # PATTERN EXPECTED_COUNT
  local n; n=$(grep -c -- "$1" <<<"$out"); [ "$n" -eq "$2" ]
}

out=$(mpi -np 1 "$CHECK" --json 2>&1)
check "default: 0, source default" all_lines '"size_hint":0,.*"source":"default"' 1

out=$(mpi -np 2 --mca btl_llrdma_size_hint 16K "$CHECK" --json 2>&1)
check "mpirun --mca 16K reaches both ranks as environment" \
  all_lines '"size_hint":16384,.*"source":"env"' 2

out=$(OMPI_MCA_btl_llrdma_size_hint=0x4000 mpi -np 4 -x OMPI_MCA_btl_llrdma_size_hint "$CHECK" --json 2>&1)
check "-x OMPI_MCA_btl_llrdma_size_hint=0x4000 on 4 ranks" \
  all_lines '"size_hint":16384,.*"source":"env"' 4

mkdir -p "$HOME/.openmpi"
printf '# test\n\nbtl_llrdma_size_hint = 8K\n' > "$HOME/.openmpi/mca-params.conf"
out=$(mpi -np 2 "$CHECK" --json 2>&1)
check "\$HOME/.openmpi/mca-params.conf: file source with path and line" \
  all_lines "\"size_hint\":8192,.*\"source\":\"file\",.*$HOME/.openmpi/mca-params.conf:3" 2

out=$(mpi -np 2 --mca btl_llrdma_size_hint 32K "$CHECK" --json 2>&1)
check "environment/--mca beats the parameter file" \
  all_lines '"size_hint":32768,.*"source":"env"' 2

out=$(RDMA_LOW_LATENCY_HINT=0x1000 mpi -np 2 -x RDMA_LOW_LATENCY_HINT "$CHECK" --json 2>&1)
check "parameter file beats the RDMA_LOW_LATENCY_HINT alias" \
  all_lines '"size_hint":8192,.*"source":"file"' 2
rm -f "$HOME/.openmpi/mca-params.conf"

out=$(RDMA_LOW_LATENCY_HINT=0x1000 mpi -np 2 -x RDMA_LOW_LATENCY_HINT "$CHECK" --json 2>&1)
check "RDMA_LOW_LATENCY_HINT alone: alias source, hex parsed" \
  all_lines '"size_hint":4096,.*"source":"alias"' 2

out=$(RDMA_LOW_LATENCY_HINT=0x1000 mpi -np 2 -x RDMA_LOW_LATENCY_HINT \
      --mca btl_llrdma_size_hint 2M "$CHECK" --json 2>&1)
check "--mca beats the alias" all_lines '"size_hint":2097152,.*"source":"env"' 2

conf="$LLRDMA_TEST_HOME/site.conf"
printf 'btl_llrdma_size_hint = 64KiB\n' > "$conf"
out=$(mpi -np 2 --mca mca_base_param_files "$conf" "$CHECK" --json 2>&1)
check "mca_base_param_files: file source names that file" \
  all_lines "\"size_hint\":65536,.*\"source\":\"file\",.*$conf:1" 2

out=$(mpi -np 2 --mca btl_llrdma_size_hint 16K "$TAPI" set 4096 2>&1)
check "llrdma_set_size_hint() before MPI_Init beats --mca" grep -q "t_api: PASS" <<<"$out"

# coll-only override and segment shown in the per-rank configuration.
out=$(mpi -np 2 --mca btl_llrdma_size_hint 16K --mca coll_llrdma_allreduce_segment_size 4K \
      "$CHECK" --json 2>&1)
check "coll segment override shows in the configuration" \
  all_lines '"coll_segment_bytes":4096' 2

# Dump to a per-rank file pattern.
out=$(mpi -np 2 --mca btl_llrdma_size_hint 16K --mca btl_llrdma_dump "$LLRDMA_TEST_HOME/d-%r.json" \
      "$TRING" 2>&1)
check "btl_llrdma_dump writes one JSON file per rank" \
  bash -c "grep -q '\"rank\":0,.*\"size_hint\":16384' '$LLRDMA_TEST_HOME/d-0.json' && grep -q '\"rank\":1,' '$LLRDMA_TEST_HOME/d-1.json'"
out=$(mpi -np 2 --mca btl_llrdma_dump stderr "$TRING" 2>&1)
check "btl_llrdma_dump=stderr prints one JSON object per rank" all_lines '^{"rank":' 2
finish

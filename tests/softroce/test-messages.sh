#!/usr/bin/env bash
# With a device that grants less than the profile (rxe has no CQ moderation,
# which matters with the progress thread), "profile not applied" is printed
# once per job and device, not once per rank, names the device, and mpirun
# prints no "Data unpack would read past end of buffer" between runs; without
# the thread, moderation is not reported at all.  Soft-RoCE VM only.
. ./tests/mpi/env.sh
dev=${SOFTROCE_VM_IBDEV:-rxe0}

# count RUNS MPIRUN-ARGS...: one line per run, "HELP UNPACK MISSES RC".
count() {
  local runs=$1 rc out; shift
  for _ in $(seq "$runs"); do
    rc=0
    out=$(mpi --mca pml ob1 --mca btl_llrdma_dump stderr "$@" 2>&1) || rc=$?
    echo "$out" | grep -v '^{' | grep -i "granted less\|unpack\|ORTE_ERROR" | sed 's/^/# /'
    echo "$(grep -c "the RDMA device granted less than the transport profile" <<<"$out")" \
      "$(grep -c "Data unpack\|ORTE_ERROR_LOG" <<<"$out")" \
      "$(grep -c '"cq_moderation_supported":0' <<<"$out")" "$rc" \
      "$(grep -c "device $dev:1 granted less than asked" <<<"$out")"
  done
}

# Every line: once when some rank's dump shows the device refusing something
# that matters (rxe: CQ moderation, with the progress thread), never more; no
# unpack error; the job passed.
once() { # DESCRIPTION RUNS MPIRUN-ARGS...
  local d=$1 res; shift
  res=$(count "$@")
  grep '^#' <<<"$res"
  check "$d" awk '!/^#/ { n++; if ($3 > 0 && ($1 != 1 || $5 != 1)) bad = 1;
                          if ($1 > 1 || $2 != 0 || $4 != 0) bad = 1 }
                  END { exit (n == 0 || bad) }' <<<"$res"
}
# Without the progress thread nothing is armed, so a device without CQ
# moderation (all rxe lacks) is no reason to print anything: not once.
quiet() { # DESCRIPTION RUNS MPIRUN-ARGS...
  local d=$1 res; shift
  res=$(count "$@")
  grep '^#' <<<"$res"
  check "$d" awk '!/^#/ { n++; if ($1 != 0 || $2 != 0 || $3 == 0 || $4 != 0) bad = 1 }
                  END { exit (n == 0 || bad) }' <<<"$res"
}

# As in contrib/bootstrap's demo: llrdma-check on 4 ranks, then jobs over
# btl self,llrdma one after the other (llrdma-bench sweep).
PT=(--mca btl_llrdma_progress_thread 1)
once "progress thread, llrdma-check on 4 ranks: 'profile not applied' once per run, naming $dev, no unpack error" \
  3 -np 4 "${PT[@]}" --mca btl_llrdma_size_hint 16K "$CHECK"
once "progress thread, 2 ranks over btl self,llrdma: once per run, no unpack error" \
  3 -np 2 "${PT[@]}" --mca btl self,llrdma --bind-to none --mca btl_llrdma_size_hint 8K "$CHECK"
quiet "no progress thread, llrdma-check on 4 ranks: no 'profile not applied' for CQ moderation" \
  2 -np 4 --mca btl_llrdma_size_hint 16K "$CHECK"
finish

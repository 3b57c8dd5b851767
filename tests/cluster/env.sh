# shellcheck shell=bash disable=SC2034  # C, T, ... are for the tests that source this
# Sourced by the cluster tests (tests/cluster/test-*.sh), which run on node0 of
# `contrib/softroce-vm --nodes 2` (see tier.sh): tests/mpi/env.sh, plus the
# mpirun options that reach the other guests.
. ./tests/mpi/env.sh
if [ -z "${SOFTROCE_VM_HOSTFILE:-}" ] || [ "${SOFTROCE_VM_NODES:-1}" -lt 2 ]; then
  echo "1..0 # SKIP not on node0 of a softroce-vm cluster (--nodes 2 or more)"
  exit 77
fi
# Ranks on another node get only what mpirun forwards: OMPI_MCA_* (the
# component path among them) by itself, the rest with -x.  vader inside a
# node, btl/llrdma between nodes.  Keepalives on mpirun's links to the other
# nodes' daemons: a node that loses power is noticed in ~11 s (Open MPI's
# default, 300 s + 9 x 20 s, would outlast the test's time limit).
C=(--hostfile "$SOFTROCE_VM_HOSTFILE" -x LD_LIBRARY_PATH -x LLRDMA_HELPDIR
  --mca pml ob1 --mca btl self,vader,llrdma --bind-to none --mca mpi_yield_when_idle 1
  --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3)
T="$top_builddir/tests/mpi/t_llrdma"
TFLOW="$top_builddir/tests/softroce/t_flow"
BENCH="$top_builddir/llrdma-bench"
# Cross-node runs are slow under emulation (a 1 MB round trip takes ~0.2 s).
export LLRDMA_TEST_TIMEOUT=${LLRDMA_TEST_TIMEOUT:-600}

# across NODE...: the last run (with btl_llrdma_verbose 20) set up btl/llrdma
# connections on each NODE: proof that its traffic crossed the link.
across() {
  local n
  for n in "$@"; do
    grep -q "^\[$n:[0-9]*\] btl:llrdma: .*connection .*established" <<<"$out" || return 1
  done
}

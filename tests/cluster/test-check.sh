#!/usr/bin/env bash
# llrdma-check across two nodes: every rank's host, device and hint, and the
# agreement check; whether btl/llrdma carries the traffic between the nodes
# (and exit 4 with tcp there instead); then the report's failure case 3 across hosts: node1's
# system parameter file sets another hint than node0's ranks have, so
# llrdma-check and an application both stop with a report naming the deviant
# rank, its host, its value and the file it came from.
. "$(dirname "$0")/env.sh"
launch -np 4 --map-by node "${C[@]}" --mca btl_llrdma_size_hint 16K "$CHECK"
echo "$out" | grep -E '^ +[0-9]+ +node|agree' | sed 's/^/# /'
rows() { # NODE: two ranks on NODE, each with hint 16K from the environment, rxe0 active
  [ "$(grep -cE "^ +[0-9]+ +$1 +[0-9]+ +16K +env .* rxe0 +active" <<<"$out")" -eq 2 ]
}
check_run "4 ranks agree on 16K across node0 and node1" has "all 4 ranks agree: size hint 16K"
check_run "node0: 2 ranks, rxe0 active, 16K from the environment" rows node0
check_run "node1: 2 ranks, rxe0 active, 16K from the environment" rows node1
check_run "every rank: btl/llrdma carries traffic to the other node" \
  count "^ *network: btl/llrdma carries traffic to all 2 peers on other nodes" 4

# The hint set, but tcp between the nodes (issue 27): btl/llrdma carries
# nothing, llrdma-check exits 4 saying what does, and the job says it once.
NOLL=("${C[@]/self,vader,llrdma/self,vader,tcp}" --mca btl_tcp_if_include 192.0.2.0/24)
launch -np 4 --map-by node "${NOLL[@]}" --mca btl_llrdma_size_hint 16K "$CHECK"
echo "$out" | grep -E 'network:|llrdma: btl' | sed 's/^/# /'
check "no btl/llrdma between the nodes: llrdma-check exits 4 (exit $rc)" test $rc -eq 4
check "every rank: none of its 2 peers on the other node, which go over tcp" \
  count "^ *network: btl/llrdma reaches none of the 2 peers on other nodes .*they go over tcp" 4
check "one line for the job (rank 0's)" count "llrdma: btl/llrdma reaches none .*(rank 0's view" 1

# Failure case 3 across hosts.  node1's system file (thrown away with the
# guest) says 64K; node0's ranks read 16K from $HOME's file (ranks on node1 have
# another HOME: ssh's).  3 ranks on node0, 1 on node1.
sysconf=/etc/openmpi/openmpi-mca-params.conf
ssh node1 "cp $sysconf $sysconf.orig && printf '\nbtl_llrdma_size_hint = 64K\n' >> $sysconf" ||
  not_ok "could not edit node1's $sysconf"
line=$(ssh node1 "grep -n '^btl_llrdma_size_hint' $sysconf" | cut -d: -f1)
mkdir -p "$HOME/.openmpi"
printf 'btl_llrdma_size_hint = 16K\n' > "$HOME/.openmpi/mca-params.conf"
deviant="rank 3 on node1: 64K (file $sysconf:$line)"
launch -np 4 --host node0:3,node1:1 "${C[@]}" "$CHECK"
echo "$out" | grep -E 'rank [0-9]+ on|majority|differ' | sed 's/^/# /'
check "llrdma-check exits 1 on the cross-host mismatch (exit $rc)" test $rc -eq 1
check "report: '$deviant'" has "$deviant"
check "report: majority 16K" has "majority 16K"
launch -np 4 --host node0:3,node1:1 "${C[@]}" "$TRING"
check "an application stops on the mismatch (exit $rc)" test $rc -ne 0 -a $rc -ne 124 -a $rc -ne 137
check "the application never ran" lacks "t_ring rank [0-9]*: PASS"
check "its report names rank 3, node1, 64K and node1's file" has "$deviant"
ssh node1 "mv $sysconf.orig $sysconf"
rm -f "$HOME/.openmpi/mca-params.conf"
finish

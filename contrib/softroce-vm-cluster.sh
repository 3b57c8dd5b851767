# shellcheck shell=bash
# softroce-vm-cluster.sh -- the cluster part of contrib/softroce-vm
# (--nodes N > 1), sourced by it on the host and in every guest.  Not a
# program of its own.  See docs/softroce.md, "Several nodes".
#
# Layout: the guests node0..nodeN-1 each get one virtio NIC "eth0" on one
# Ethernet segment: a hub, i.e. one more QEMU process without a machine
# (`-machine none`) whose ports are `-netdev stream` servers on unix sockets
# in the run directory, joined by `-netdev hubport`; each guest's NIC is a
# stream client of its port.  Frames never leave the QEMU processes; no
# multicast, no host address.  Stream sockets push back where vde_switch's
# unix datagrams (net.unix.max_dgram_qlen: 10 per port) drop a burst that a
# CPU-starved guest does not take in time; RoCE expects a lossless fabric, and
# rxe pays a 2 s retransmission timeout per lost frame.  A hub rather than
# point-to-point links keeps one NIC and one rxe0 per guest for any N (a mesh
# would need N-1 NICs, i.e. N-1 RDMA devices, per guest); QEMU's virtio-net
# drops frames for other MACs before the guest sees them.  nodeK has
# 192.0.2.(K+1)/24 and MAC 52:54:00:c0:02:0K.
#
# A directory shared read-write by all guests ($SOFTROCE_VM_CLUSTER_DIR) holds
# what the run made for them: /etc/hosts lines, the hostfile, an ssh key pair
# and a host key made for this run only, sshd/ssh settings (and slurm.conf),
# and the flags through which guests and host talk: ready-nodeK (nodeK's sshd
# is up), stop (node0's command has ended), kill-nodeK / killed-nodeK (cut
# nodeK's power on request).

readonly CLUSTER_NET=192.0.2           # nodeK is $CLUSTER_NET.(K+1)
readonly CLUSTER_READY_S=600           # node0 waits this long for the others

# ============================================================================
# Guest side (runs in stage 2, PID 1, before the command)
# ============================================================================
cluster_guest_nic() {   # sets netdev and ip of guest_main: eth0, 192.0.2.(K+1)
  modprobe virtio_net || guest_fail "modprobe virtio_net failed"
  local i
  for i in $(seq 100); do [[ -e /sys/class/net/eth0 ]] && break; sleep 0.1; done
  [[ -e /sys/class/net/eth0 ]] || guest_fail "no eth0 (virtio NIC) after 10 s"
  # shellcheck disable=SC2034  # guest_main's locals
  netdev=eth0 ip=$CLUSTER_NET.$((NODE + 1))
}

cluster_guest_services() {  # sshd (+ Slurm); nodes other than node0 never return
  local cl=$CLUSTER_DIR k i missing
  cat "$cl/hosts" >> /etc/hosts
  mkdir -p /run/sshd /etc/ssh/ssh_config.d
  cp "$cl/ssh_config" /etc/ssh/ssh_config.d/softroce-vm.conf
  # ulimit -l is already unlimited: sessions (MPI ranks) inherit it from sshd.
  /usr/sbin/sshd -f "$cl/sshd_config" -E "$RUN_DIR_GUEST/sshd.log" ||
    guest_fail "sshd did not start ($(tail -n 3 "$RUN_DIR_GUEST/sshd.log" 2> /dev/null))"
  [[ $SLURM == 0 ]] || cluster_guest_slurm
  guest_log "node$NODE: sshd up$([[ $SLURM == 0 ]] || echo ", slurmd started")"
  if [[ $NODE != 0 ]]; then
    touch "$cl/ready-node$NODE"
    until [[ -e "$cl/stop" ]]; do sleep 0.5; done
    guest_finish 0
  fi
  for i in $(seq $((CLUSTER_READY_S * 5))); do
    missing=''
    for ((k = 1; k < NODES; k++)); do [[ -e "$cl/ready-node$k" ]] || missing+=" node$k"; done
    [[ -n "$missing" ]] || break
    sleep 0.2
  done
  [[ -z "$missing" ]] || guest_fail "not ready after ${CLUSTER_READY_S} s:$missing"
  guest_log "node0: all $NODES nodes ready"
  [[ $SLURM == 0 ]] || cluster_guest_slurm_wait
}

cluster_guest_slurm() {  # slurmctld on node0, slurmd everywhere
  mkdir -p /etc/slurm /var/spool/slurmd /var/spool/slurmctld
  cp "$CLUSTER_DIR/slurm.conf" /etc/slurm/slurm.conf
  # slurmd 22.05 initialises its cgroup plugin even with proctrack/pgid.
  mount -t cgroup2 none /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/system.slice ||
    guest_fail "cannot mount cgroup2"
  printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' > /etc/slurm/cgroup.conf
  if [[ $NODE == 0 ]]; then
    slurmctld 2>> "$RUN_DIR_GUEST/slurmctld.log" ||
      guest_fail "slurmctld did not start: $(tail -n 5 "$RUN_DIR_GUEST/slurmctld.log" | tr '\n' ' ')"
  fi
  slurmd 2>> "$RUN_DIR_GUEST/slurmd.log" ||
    guest_fail "slurmd did not start: $(tail -n 5 "$RUN_DIR_GUEST/slurmd.log" | tr '\n' ' ')"
}

cluster_guest_slurm_wait() {  # every node idle in sinfo
  local i idle=0
  for i in $(seq 240); do
    idle=$(sinfo -h -N -t idle -o %N 2> /dev/null | sort -u | wc -l)
    [[ $idle -lt $NODES ]] || break
    sleep 0.5
  done
  [[ $idle -ge $NODES ]] ||
    guest_fail "Slurm: $idle of $NODES nodes idle after 120 s: $(sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')"
  guest_log "node0: Slurm: $NODES nodes idle"
}

# ============================================================================
# Host side
# ============================================================================
cluster_files() {  # DIR: what all guests share, made for this run only
  local cl=$1 k names=''
  ssh-keygen -q -t ed25519 -N '' -C softroce-vm-run -f "$cl/id_ed25519" ||
    die "ssh-keygen failed"
  ssh-keygen -q -t ed25519 -N '' -C softroce-vm-host -f "$cl/ssh_host_ed25519_key" ||
    die "ssh-keygen failed"
  : > "$cl/hosts"
  : > "$cl/hostfile"
  for ((k = 0; k < NODES; k++)); do
    echo "$CLUSTER_NET.$((k + 1)) node$k" >> "$cl/hosts"
    echo "node$k slots=$SLOTS" >> "$cl/hostfile"
    names+="${names:+,}node$k,$CLUSTER_NET.$((k + 1))"
  done
  echo "$names $(cut -d' ' -f1,2 "$cl/ssh_host_ed25519_key.pub")" > "$cl/known_hosts"
  cat > "$cl/sshd_config" << EOF
ListenAddress 0.0.0.0
HostKey $cl/ssh_host_ed25519_key
AuthorizedKeysFile $cl/id_ed25519.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes no
PidFile /run/sshd.pid
EOF
  cat > "$cl/ssh_config" << EOF
Host node* $CLUSTER_NET.*
  IdentityFile $cl/id_ed25519
  GlobalKnownHostsFile $cl/known_hosts
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
  ConnectTimeout 60
EOF
  [[ $SLURM == 0 ]] || cluster_slurm_conf "$cl"
}

# Slurm without munge (auth/none: every daemon runs inside this run's guests),
# no cgroups (the guests have none mounted), node CPUs = --slots.
cluster_slurm_conf() {  # DIR
  cat > "$1/slurm.conf" << EOF
ClusterName=softroce
SlurmctldHost=node0
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$RUN_DIR_GUEST/slurmctld.log
SlurmdLogFile=$RUN_DIR_GUEST/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SlurmdTimeout=120
NodeName=node[0-$((NODES - 1))] CPUs=$SLOTS State=UNKNOWN
PartitionName=softroce Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

alive() {  # PID: a child that has not ended (a zombie has ended)
  local st
  read -r st 2> /dev/null < "/proc/$1/stat" || return 1
  [[ $st != *") Z "* ]]
}

kernel_warnings() {  # FILE WHO: the kernel's warnings in a console log, if any
  local w
  [[ -e $1 ]] || return 0
  w=$(grep -E 'WARNING:|BUG:|watchdog|stall|timed out|Oops|panic|hung_task' "$1" | head -n 20) || true
  [[ -z $w ]] || printf '%s\n%s\n' "----- $2 guest console, kernel warnings -----" "$w" >&2
}

cluster_report() {  # K WHAT: nodeK ended early: say so with its console tail
  local r=$RUN/node$1
  note "node$1 $2"
  [[ ! -e "$r/guest-error" ]] || note "node$1: guest setup failed: $(cat "$r/guest-error")"
  show_console "$r/console.log" "node$1 "
  if grep -q -v CPUID "$r/qemu.err"; then
    echo "----- node$1 QEMU stderr -----" >&2
    grep -v CPUID "$r/qemu.err" >&2
  fi
}

# shellcheck disable=SC2054  # commas inside QEMU option values are intended
cluster_hub() {  # the guests' Ethernet segment, in the background
  local hub=(qemu-system-x86_64 -nodefaults -no-user-config -display none -machine none) k
  mkdir "$RUN/hub"
  for ((k = 0; k < NODES; k++)); do
    hub+=(-netdev "stream,id=port$k,server=on,addr.type=unix,addr.path=$RUN/hub/node$k.sock"
          -netdev "hubport,id=hub$k,hubid=0,netdev=port$k")
  done
  "${hub[@]}" < /dev/null > "$RUN/hub.log" 2>&1 &
}

# shellcheck disable=SC2054  # commas inside QEMU option values are intended
cluster_start() {  # K: boot nodeK (node0 last: its output goes to our stdout/stderr)
  local k=$1 r=$RUN/node$1
  qemu_command "$r"
  QEMU+=(-netdev "stream,id=net0,server=off,addr.type=unix,addr.path=$RUN/hub/node$k.sock"
         -device "virtio-net-pci,netdev=net0,mac=52:54:00:c0:02:$(printf %02x "$k")")
  if [[ $k == 0 ]]; then
    mkfifo "$r/stdout.fifo" "$r/stderr.fifo"
    { cat "$r/stdout.fifo" || exec cat "$r/stdout.fifo" > /dev/null; } & OUT_PID=$!
    { cat "$r/stderr.fifo" >&2 || exec cat "$r/stderr.fifo" > /dev/null; } & ERR_PID=$!
    timeout -k 5 "$TIMEOUT" "${QEMU[@]}" < /dev/null 2> "$r/qemu.err" & QEMU_PID=$!
    if [[ $VERBOSE == 1 ]]; then
      tail -n +1 -F --pid="$QEMU_PID" "$r/console.log" >&2 2> /dev/null & TAIL_PID=$!
    fi
  else  # the others' output ports write plain files (kept for a failure report)
    : > "$r/stdout.fifo"
    : > "$r/stderr.fifo"
    # Outlives node0's limit a little: node0's end stops it first.
    timeout -k 5 $((TIMEOUT + 60)) "${QEMU[@]}" < /dev/null 2> "$r/qemu.err" & NODE_PIDS[k]=$!
  fi
}

# shellcheck disable=SC2034  # STATUS is host_main's
run_cluster() {  # sets STATUS
  local cl k r t0 qrc dead='' i
  local -A killed=()
  RUN=$(mktemp -d "${TMPDIR:-/tmp}/softroce-vm.XXXXXX")
  cl=$RUN/cluster
  mkdir -m 700 "$cl"
  cluster_files "$cl"
  for ((k = 0; k < NODES; k++)); do
    r=$RUN/node$k
    mkdir "$r"
    write_run_dir "$r" "node$k" "$cl"
    printf 'NODE=%q NODES=%q CLUSTER_DIR=%q SLOTS=%q SLURM=%q\n' \
      "$k" "$NODES" "$cl" "$SLOTS" "$SLURM" > "$r/cluster"
  done
  cluster_hub
  SWITCH_PID=$!
  for i in $(seq 100); do [[ -S "$RUN/hub/node$((NODES - 1)).sock" ]] && break; sleep 0.1; done
  [[ -S "$RUN/hub/node$((NODES - 1)).sock" ]] ||
    die "the network hub (QEMU) did not start: $(grep -v CPUID "$RUN/hub.log")"
  t0=$SECONDS
  for ((k = NODES - 1; k >= 0; k--)); do cluster_start "$k"; done

  # Watch: node0 ends the run; another node that ends first died (or was
  # killed on request through kill-nodeK).
  while alive "$QEMU_PID" && [[ -z "$dead" ]]; do
    for ((k = 1; k < NODES; k++)); do
      [[ -z "${killed[$k]:-}" ]] || continue
      if [[ -e "$cl/kill-node$k" ]]; then
        kill "${NODE_PIDS[k]}" 2> /dev/null || true
        wait "${NODE_PIDS[k]}" 2> /dev/null || true
        killed[$k]=1
        touch "$cl/killed-node$k"
      elif ! alive "${NODE_PIDS[k]}"; then
        dead=$k
        break
      fi
    done
    sleep 0.25
  done
  if [[ -n "$dead" ]]; then  # stop node0 too: its command cannot be trusted now
    qrc=0; wait "${NODE_PIDS[dead]}" || qrc=$?
    kill "$QEMU_PID" 2> /dev/null || true
  fi
  qrc=0; wait "$QEMU_PID" || qrc=$?
  QEMU_PID=''
  end_reader "$OUT_PID" "$RUN/node0/stdout.fifo"; OUT_PID=''
  end_reader "$ERR_PID" "$RUN/node0/stderr.fifo"; ERR_PID=''
  if [[ -n "$TAIL_PID" ]]; then wait "$TAIL_PID" || true; TAIL_PID=''; fi
  if [[ -n "$dead" ]]; then
    cluster_report "$dead" "ended before node0's command did (it died or failed to start); all nodes were stopped"
    STATUS=$EX_GUEST
  else
    guest_status "$RUN/node0" "$qrc" "$t0" 'node0: '
  fi
  # The others power off when they see "stop"; whatever is left is killed.
  touch "$cl/stop"
  for ((k = 1; k < NODES; k++)); do
    for _ in $(seq 60); do alive "${NODE_PIDS[k]}" || break; sleep 0.25; done
    # A node that no longer answers (its network or kernel hung) fails the
    # command without dying: say which, with what its kernel logged.
    if alive "${NODE_PIDS[k]}"; then
      cluster_report "$k" "did not power off within 15 s of the stop (hung?); killed"
    elif [[ $STATUS != 0 && $k != "$dead" ]]; then
      kernel_warnings "$RUN/node$k/console.log" "node$k"
    fi
    kill "${NODE_PIDS[k]}" 2> /dev/null || true
    wait "${NODE_PIDS[k]}" 2> /dev/null || true
    NODE_PIDS[k]=''
  done
  kill "$SWITCH_PID" 2> /dev/null || true
  SWITCH_PID=''
}

#!/usr/bin/env bash
# Soft-RoCE benchmark of btl/llrdma, used for the "Soft-RoCE" section of
# docs/benchmarks.md.  Each repetition boots one Soft-RoCE guest
# (contrib/softroce-vm, TCG) and measures, side by side on the same rxe0:
#   1. the raw verbs floor: perftest ib_send_lat, 8 B (one-way figures; x2 = round trip)
#   2. btl/llrdma: llrdma-bench sweep --hints 0,8K,64K over pml ob1 + btl self,llrdma
#   3. UCX over rxe0: llrdma-bench pingpong at the same sizes (pml ucx)
#
# Usage (as root, from the source tree root, after building and installing into
# $PREFIX, by default as below):
#   rm -rf /tmp/sb && mkdir /tmp/sb && cd /tmp/sb && /work/main/configure --prefix=/tmp/sb/inst \
#     && make -j2 && make install
#   contrib/bench/softroce-bench.sh [REPS]       # default 3; results in $OUT (default /tmp/sb/bench)
# Environment: PREFIX (/tmp/sb/inst), OUT (/tmp/sb/bench, must lie under a directory the
# guest can write: it is passed with --rw), WARMUP/ITERS (pingpong, llrdma and UCX),
# PT_ITERS (perftest iterations), VM_TIMEOUT (seconds per guest).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/tmp/sb/inst}
OUT=${OUT:-/tmp/sb/bench}
WARMUP=${WARMUP:-100}
ITERS=${ITERS:-1000}
PT_ITERS=${PT_ITERS:-5000}
SIZES=8,256,1K,4K,8K,16K,62K,64K
# the sweep adds hint-1, hint, hint+1 for each hint; UCX gets the same sizes
UCX_SIZES=$SIZES,8191,8193,65535,65537

guest() {
  local d=$1
  mkdir -p "$d"
  export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib"
  export OMPI_MCA_mca_base_component_path="$PREFIX/lib/openmpi:SYS_DEFAULT"
  export LLRDMA_MPIRUN=${LLRDMA_MPIRUN:-$(command -v mpirun)}
  local dev=${SOFTROCE_VM_IBDEV:-rxe0} gid=${SOFTROCE_VM_GID_INDEX:-1} t0=$SECONDS
  {
    echo "uname: $(uname -srvm)"; echo "nproc: $(nproc)"
    echo "rdma_rxe: $(lsmod | grep -c '^rdma_rxe')"
    echo "mpirun: $("$LLRDMA_MPIRUN" --version | head -1)"
    echo "ucx: $(ucx_info -v 2>/dev/null | head -1)"
    echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2>/dev/null)"
    echo "rdma-core: $(dpkg-query -W -f '${Version}' rdma-core 2>/dev/null)"
    ibv_devinfo -d "$dev" | grep -E 'hca_id|transport|active_mtu|link_layer|state'
    echo "WARMUP=$WARMUP ITERS=$ITERS PT_ITERS=$PT_ITERS"
  } > "$d/machine.txt" 2>&1
  cat "$d/machine.txt"

  echo "=== 1. perftest ib_send_lat -s 8 -n $PT_ITERS ($((SECONDS - t0)) s)"
  timeout 300 ib_send_lat -d "$dev" -x "$gid" -s 8 -n "$PT_ITERS" > "$d/perftest-server.txt" 2>&1 &
  local spid=$! i
  for i in $(seq 300); do
    ss -ltnH 'sport = :18515' | grep -q . && break
    kill -0 "$spid" 2> /dev/null || break
    sleep 0.1
  done
  timeout 300 ib_send_lat -d "$dev" -x "$gid" -s 8 -n "$PT_ITERS" 127.0.0.1 > "$d/perftest-client.txt" 2>&1
  echo "client rc=$?"; wait "$spid"; echo "server rc=$?"
  cat "$d/perftest-client.txt"

  echo "=== 2. llrdma sweep ($((SECONDS - t0)) s)"
  timeout 900 llrdma-bench sweep --hints 0,8K,64K \
    --mpirun-args "--mca pml ob1 --mca btl self,llrdma --bind-to none" \
    --csv "$d/llrdma-sweep.csv" --show-output -- --warmup "$WARMUP" --iters "$ITERS" \
    > "$d/llrdma-sweep.txt" 2>&1
  echo "sweep rc=$?"
  cat "$d/llrdma-sweep.txt"

  echo "=== 3. UCX pingpong ($((SECONDS - t0)) s)"
  timeout 600 "$LLRDMA_MPIRUN" -np 2 --bind-to none \
    --mca pml ucx --mca btl ^vader,tcp,openib,uct,ofi --mca osc ^ucx \
    -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_UD_ETH_DGID_CHECK=n \
    llrdma-bench pingpong --sizes "$UCX_SIZES" --warmup "$WARMUP" --iters "$ITERS" \
    --csv "$d/ucx.csv" > "$d/ucx.txt" 2>&1
  echo "ucx rc=$?"
  cat "$d/ucx.txt"
  echo "=== done ($((SECONDS - t0)) s)"
}

if [[ ${1:-} == --guest ]]; then
  guest "$2"
  exit 0
fi

reps=${1:-3}
mkdir -p "$OUT"
export PREFIX WARMUP ITERS PT_ITERS
for r in $(seq "$reps"); do
  echo "##### repetition $r"
  "$here/../softroce-vm" --rw "$(dirname "$OUT")" --timeout "${VM_TIMEOUT:-1500}" -- \
    bash "$here/softroce-bench.sh" --guest "$OUT/rep$r" 2>&1 | tee "$OUT/rep$r.log"
done

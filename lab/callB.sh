#!/usr/bin/env bash
# Device call B: GPU tests, the variants against the peer (layer, tune), eager/graph-50 host and device inputs,
# multi-process check per variant, the torch store launchers at 2, sanitizers. Each step bounded; logs under /tmp/o.
set -u
B=$PWD/target/gpu-bundle
O=/tmp/o
mkdir -p "$O"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"
step() {
  local name=$1 limit=$2 t0
  shift 2
  t0=$(date +%s)
  timeout -s KILL "$limit" "$@" > "$O/$name.txt" 2>&1
  echo "== $name: rc=$? in $(( $(date +%s) - t0 )) s (at $(( $(date +%s) - T0 )) s)"
  tail -n "${TAILN:-6}" "$O/$name.txt"
}
TAILN=8 step gpu-tests 150 "$B/bin/gpu-tests" --reports-dir="$O/reports"
grep -E "✘|MethodSource|=> " "$O/gpu-tests.txt" | head -40
step peer 45 python3 "$B/peer/unfused_loopback.py" --csv "$O/peer.csv"
tail -n 12 "$O/peer.txt"
TAILN=60 step variants 150 "$B/bin/bench" --modes layer --l2 hot --variants ll128,ll,simple,unfused,auto \
  --peer-csv "$O/peer.csv" --csv "$O/variants.csv" --tune "$O/crossovers-sm_90.txt"
cat "$O/crossovers-sm_90.txt"
TAILN=30 step host-device 60 "$B/bin/bench" --modes eager,layer --l2 hot --inputs host,device \
  --batches 1,256 --csv "$O/host-device.csv"
TAILN=12 step launchers 45 "$B/bin/launchers" "$O/launchers" 2
TAILN=12 step sanitize 70 "$B/bin/sanitize" "$O/san"
tar czf "$OUT/callB.tgz" -C /tmp o

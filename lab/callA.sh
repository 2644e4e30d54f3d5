#!/usr/bin/env bash
# Device call A: soaks of the HEAD kernel (loopback batch 1 and 8, 8 processes under MPS), the launchers, bin/mps.
set -u
B=$PWD/target/gpu-bundle
O=/tmp/o
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"
step() {
  local name=$1 limit=$2 t0
  shift 2
  t0=$(date +%s)
  timeout -s KILL "$limit" "$@" > "$O/$name.txt" 2>&1
  echo "== $name: rc=$? in $(( $(date +%s) - t0 )) s"
  tail -n "${TAILN:-8}" "$O/$name.txt"
}
step soak-loopback-b1 60 "$B/bin/dcp4j" soak
step soak-loopback-b8 60 "$B/bin/dcp4j" soak --batch 8
TAILN=30 step launchers 150 "$B/bin/launchers" "$O/launchers"
export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
nvidia-cuda-mps-control -d && echo "MPS started"
TAILN=12 step soak-processes-b1 90 "$B/bin/dcp4j" launch --nproc 8 -- soak
echo quit | nvidia-cuda-mps-control
sleep 2
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
TAILN=40 step mps 180 "$B/bin/mps" "$O/mps" --batches 1,16,256
tar czf "$OUT/callA.tgz" -C /tmp o

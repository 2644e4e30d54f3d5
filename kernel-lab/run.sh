#!/usr/bin/env bash
# On a GPU host with nvcc, from the repository root, with kernel-lab/build carried from `kernel-lab/prepare`: the layer
# shape at batches 1..256 for the tree's kernel, the candidate's and the timeline build (where kernel-lab/prepare built
# them; each output checked bit for bit against the tree's and against fp64; a timeline build's stamps printed after
# its row), the unfused peer in the same call, the SASS of the candidate (else the tree's kernel), and Nsight Compute of
# it at batch 256 and 16. Results under $OUT (else /tmp/kernel-lab). Every step is bounded, so a
# kernel that hangs cannot take the whole call.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$here/build
out=${OUT:-/tmp/kernel-lab}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvcc -std=c++17 -O2 -I"$build/gen" -o "$build/harness" "$here/harness.cu" -lcuda || exit 1
cubins=("$build/tree.cubin")
[ -f "$build/candidate.cubin" ] && cubins+=("$build/candidate.cubin")
last=${cubins[-1]}  # profiled: the candidate where there is one (a timeline build's stamps would distort it)
[ -f "$build/timeline.cubin" ] && cubins+=("$build/timeline.cubin")
timeout -s KILL 120 "$build/harness" --batches 1,2,4,8,16 "${cubins[@]}" 2>&1 | tee "$out/harness.txt"
timeout -s KILL 150 "$build/harness" --batches 32,64,128,256 "${cubins[@]}" 2>&1 | tee -a "$out/harness.txt"
timeout -s KILL 150 python3 "$build/unfused_loopback.py" --csv "$out/peer.csv" 2>&1 | tee "$out/peer.txt"
cuobjdump -sass -fun dcp4j_ll128row_bf16_base2_r8 "$last" > "$out/kernel.sass"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats
  --section Occupancy --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum)
for batch in 256 16; do
  timeout -s KILL 100 ncu --clock-control none "${sections[@]}" -k regex:ll128row -c 1 \
    "$build/harness" --profile "$batch" "$last" > "$out/ncu-$batch.txt" 2>&1
  grep -E "Duration|DRAM Through|Issue Slots Busy|Achieved Occupancy|dram__bytes|inst_executed|Warp Cycles Per Issued" \
    "$out/ncu-$batch.txt"
done

#!/usr/bin/env bash
# Hardware counters (ncu) on the main kernels of the weakest CUDA sweep rows of 32 MiB:
# 7 x 7 planes into and out of 32-channel blocks, 250-byte source rows. Binary carried in
# device-bin/st/.
B=device-bin/st
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
s=$(date +%s)
# The conversion's kernels of one timed repeat (launches 4 and 5 of those named convert/tile).
prof() { echo "=== $*"; timeout 90 ncu --clock-control none -k 'regex:^(convert|tile)$' --launch-skip 4 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio \
  $B/layoutkit bench --device cuda --repeats 6 --from "$1" --to "$2" --dims "$3" --dtype "$4" ${5:+--to-dtype $5}; }
{
prof NCHW32c NCHW N=2675,C=256,H=7,W=7 i8
prof NCHW32c NCHW N=1337,C=256,H=7,W=7 f16
prof NHWC NCHW N=33,C=250,H=64,W=64 i8
prof NCHW NHWC N=167,C=2048,H=7,W=7 f16
prof mace:in_out_width NHWC N=1337,C=256,H=7,W=7 f16
prof NCHW NCHW32c N=342,C=1000,H=7,W=7 f16
} > $OUT/ncu.txt 2>&1
echo "ncu done $(( $(date +%s) - s )) s"
# The same rows timed, and a plain copy of 32 MiB for scale.
for r in "NCHW32c NCHW N=2675,C=256,H=7,W=7 i8" "NCHW32c NCHW N=1337,C=256,H=7,W=7 f16" "NHWC NCHW N=33,C=250,H=64,W=64 i8" "NCHW NHWC N=167,C=2048,H=7,W=7 f16" "mace:in_out_width NHWC N=1337,C=256,H=7,W=7 f16" "NCHW NCHW32c N=342,C=1000,H=7,W=7 f16"; do
  set -- $r
  $B/layoutkit bench --device cuda --repeats 20 --from $1 --to $2 --dims $3 --dtype $4 --json
done > $OUT/bench.jsonl 2>&1
echo "all $(( $(date +%s) - s )) s"

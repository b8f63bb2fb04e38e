#!/usr/bin/env bash
# The same counters on the final build (flat writes with one division per vector).
B=device-bin/st
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
s=$(date +%s)
# The conversion's kernels of one timed repeat (launches 4 and 5 of those named convert/tile).
prof() { echo "=== $*"; timeout 90 ncu --clock-control none -k 'regex:^(convert|tile)$' --launch-skip 4 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio \
  $B/lk-final bench --device cuda --repeats 6 --from "$1" --to "$2" --dims "$3" --dtype "$4" ${5:+--to-dtype $5}; }
{
prof NCHW32c NCHW N=2675,C=256,H=7,W=7 i8
prof NCHW32c NCHW N=1337,C=256,H=7,W=7 f16
prof NHWC NCHW N=685,C=250,H=14,W=14 i8
} > $OUT/ncu-final.txt 2>&1
echo "ncu done $(( $(date +%s) - s )) s"
echo done

#!/usr/bin/env bash
# Whole source rows per tile: the GPU reference test of the new build, then the new build
# with the rule off (base: LAYOUTKIT_CUDA_WHOLE_ROWS=0) and on (new) alternated over each
# row of changed-rows.txt timed alone (two rounds, order reversed), then ncu on the new
# rows and on the sweep's other worst rows of 32 MiB. Run from the repository root; the
# binaries come in device-bin/wr (git-ignored, carried).
B=device-bin/wr
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
for f in $B/*.gz; do gunzip -c $f > /tmp/$(basename $f .gz); chmod +x /tmp/$(basename $f .gz); done
s=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
LAYOUTKIT_REQUIRE_CUDA=1 timeout 220 /tmp/cuda_vs_reference --test-threads 3 > $OUT/cuda_vs_reference-new.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s" | tee -a $OUT/cuda_vs_reference-new.log
for round in 1 2; do
  if [ $round = 1 ]; then order="base new"; else order="new base"; fi
  while read conv ty dims; do
    f=${conv%->*}; t=${conv#*->}
    for v in $order; do
      w=1; [ $v = base ] && w=0
      echo "$round $v $(LAYOUTKIT_CUDA_WHOLE_ROWS=$w /tmp/lk bench --device cuda --repeats 20 --json --from $f --to $t --dims $dims --dtype $ty 2>&1 | tr -d '\n ')"
    done
  done < $D/changed-rows.txt
done > $OUT/ab.txt
echo "ab $(( $(date +%s) - s )) s"
prof() { echo "=== $*"; timeout 60 ncu --clock-control none -k 'regex:^(convert|tile|gather)$' --launch-skip 4 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio \
  /tmp/lk bench --device cuda --repeats 6 --from "$1" --to "$2" --dims "$3" --dtype "$4"; }
{
prof NHWC NCHW N=33,C=250,H=64,W=64 i8
prof NHWC NCHW N=685,C=250,H=14,W=14 i8
prof OIHW mace:conv2d_filter O=7457,I=250,H=3,W=3 f16
prof mace:conv2d_filter OIHW O=114131,I=3,H=7,W=7 f16
prof NHWC mace:in_out_height N=5350,C=16,H=14,W=14 f16
prof NCHW32c NCHW N=334,C=2048,H=7,W=7 i8
} > $OUT/ncu.txt 2>&1
echo "all $(( $(date +%s) - s )) s"

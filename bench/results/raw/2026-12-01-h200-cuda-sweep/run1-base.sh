#!/usr/bin/env bash
# First H200 call: the whole CUDA sweep on the build before, hardware counters (ncu) on the
# worst families' kernels, and the tile kernels' width knobs over those families.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
for f in *.xz; do xz -dk -T4 "$f"; done; chmod +x lk-* cuda_vs_reference 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
cat $OUT/gpu.txt
s=$(date +%s)
./lk-base bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-base-1.json 2> $OUT/sweep-base-1.err
echo "sweep base rc=$? $(( $(date +%s) - s )) s"
# ncu on single rows (launch 3 = a timed repeat, after the first conversion).
prof() { timeout 60 ncu --clock-control none --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,dram__bytes.sum \
  ./lk-base bench --device cuda --repeats 6 --from "$1" --to "$2" --dims "$3" --dtype "$4" ${5:+--to-dtype $5}; }
{
prof NCHW NCHW32c N=32,C=256,H=64,W=64 i8
prof NCHW NCHW32c N=171,C=1000,H=14,W=14 i8
prof NCHW NHWC N=84,C=2048,H=14,W=14 i8
prof NHWC NCHW N=33,C=250,H=64,W=64 i8
prof mace:in_out_height NHWC N=42,C=2048,H=14,W=14 f16
prof NCHW NCHW32c N=10,C=16,H=224,W=224 f32 f16
prof NCHW32c NCHW N=685,C=1000,H=7,W=7 i8
} > $OUT/ncu.txt 2>&1
echo "ncu done $(( $(date +%s) - s )) s"
F=("NCHW->NCHW32c i8" "NCHW->NHWC i8" "NHWC->NCHW i8" "mace:in_out_height->NHWC f16" "NCHW->NCHW32c f32>f16" "NHWC->mace:in_out_height f16")
for knob in "WRITE_BYTES=8" "WRITE_BYTES=16" "READ_BYTES=16" "TILE_ELEMENTS=2048" "TILE_ELEMENTS=8192"; do
  for f in "${F[@]}"; do
    env LAYOUTKIT_CUDA_$knob ./lk-base bench --sweep --device cuda --repeats 5 --json --sweep-filter "$f" 2>/dev/null
  done > $OUT/knob-$knob.jsonl
  echo "knob $knob $(( $(date +%s) - s )) s"
done
for f in "${F[@]}"; do ./lk-base bench --sweep --device cuda --repeats 5 --json --sweep-filter "$f" 2>/dev/null; done > $OUT/knob-none.jsonl
echo "all $(( $(date +%s) - s )) s"
gzip -9 $OUT/*.json $OUT/*.jsonl

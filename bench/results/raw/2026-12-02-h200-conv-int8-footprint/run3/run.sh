#!/usr/bin/env bash
# Third H200 call: Nsight Compute on l1 and l2 @28 (i8, batch 64): the build before's kernels
# and the footprint kernel's (the build of run2).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
export PATH=/usr/local/cuda/bin:$PATH
chmod +x ./* 2>/dev/null
s=$(date +%s)
prof() { # tag binary filter types env...
  local tag=$1 bin=$2 f=$3 t=$4; shift 4
  env "$@" timeout 90 ncu --clock-control none -k regex:conv_wgmma --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed.sum \
    ./$bin conv bench --device cuda --filter "$f" --types $t --layouts NHWC --batch 64 --repeats 2 > $OUT/ncu-$tag.txt 2>&1
  echo "$tag rc=$? $(( $(date +%s) - s )) s"
}
prof l1-base layoutkit-base "l1 3x3" i8
prof l1-fp layoutkit-new "l1 3x3" i8 LAYOUTKIT_CONV_FOOTPRINT=1 LAYOUTKIT_CONV_TILE=256x64x4
prof l1-fp128 layoutkit-new "l1 3x3" i8 LAYOUTKIT_CONV_FOOTPRINT=1 LAYOUTKIT_CONV_TILE=128x64x8 LAYOUTKIT_CONV_PERSISTENT=0
prof l2-base layoutkit-base "l2 3x3 128->128 @28" i8
prof l2-fp layoutkit-new "l2 3x3 128->128 @28" i8 LAYOUTKIT_CONV_FOOTPRINT=1 LAYOUTKIT_CONV_TILE=192x128x4 LAYOUTKIT_CONV_PERSISTENT=0

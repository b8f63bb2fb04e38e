#!/bin/bash
# ncu on MobileNetV2's dw 3x3 144 @56 (stride 1) and dw 3x3/2 144 @56 at batch 64: NHWC, NCHW
# in registers, NCHW through shared memory.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/b $OUT/ncu && tar xJf device-bin/planes.tar.xz -C /tmp/b
lk=/tmp/b/layoutkit
S="--launch-count 1 --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis"
for f in "dw 3x3 144 @56" "dw 3x3/2 144 @56"; do tag=$(echo "$f" | tr -c 'a-z0-9' '_')
  for v in NHWC:planes NCHW:registers NCHW:planes; do L=${v%%:*}; m=${v##*:}
    LAYOUTKIT_CONV_DW_NCHW=$m $lk conv bench --device cuda --net mobilenetv2 --layouts $L --batch 64 --filter "$f" --repeats 1 > /dev/null 2>&1
    LAYOUTKIT_CONV_DW_NCHW=$m timeout 100 ncu $S $lk conv bench --device cuda --net mobilenetv2 --layouts $L --batch 64 --filter "$f" --repeats 1 > $OUT/ncu/$tag-$L-$m.txt 2>&1
  done
done
grep -H -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Issued Ipc|Issue Slots Busy|Executed Instructions  |Stall|L1/TEX Hit|Bank" $OUT/ncu/*.txt | head -120

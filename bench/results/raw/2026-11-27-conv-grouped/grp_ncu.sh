#!/bin/bash
# ncu on the grouped kernel: ResNeXt-50's 3x3 128->128 @56 g32 and 1024->1024 @7 g32 at batch 64.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/c $OUT && tar xJf device-bin/grp.tar.xz -C /tmp/c
S="--launch-count 1 --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
for l in C=128,HW=56,O=128,K=3,G=32 C=1024,HW=7,O=1024,K=3,G=32; do
  /tmp/c/layoutkit conv bench --device cuda --layer $l --layouts NHWC --batch 64 --repeats 1 > /dev/null 2>&1
  timeout 100 ncu $S /tmp/c/layoutkit conv bench --device cuda --layer $l --layouts NHWC --batch 64 --repeats 1 > $OUT/ncu-${l%%,HW*}.txt 2>&1
done
grep -H -E "Duration|Grid Size|Block Size|Registers|Achieved Occupancy|Theoretical Occ|Issued Warp|DRAM Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Warp Cycles Per Issued" $OUT/ncu-*.txt

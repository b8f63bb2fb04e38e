#!/bin/bash
# ncu: l4 1x1 2048->512 @7 at batch 64, the rule's tile against stream-K.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s $OUT && tar xJf device-bin/sk.tar.xz -C /tmp/s
S="--launch-count 1 --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
for v in rule sk; do E=""; [ $v = sk ] && E=1
  LAYOUTKIT_CONV_STREAM_K=$E /tmp/s/layoutkit conv bench --device cuda --net resnet50 --layouts NHWC --batch 64 --filter "l4 1x1 2048->512" --repeats 1 > /dev/null 2>&1
  LAYOUTKIT_CONV_STREAM_K=$E timeout 100 ncu $S /tmp/s/layoutkit conv bench --device cuda --net resnet50 --layouts NHWC --batch 64 --filter "l4 1x1 2048->512" --repeats 1 > $OUT/ncu-$v.txt 2>&1
done
grep -H -E "Duration|Grid Size|Registers|Achieved Occupancy|Stall|Issued Ipc|Warp Cycles Per Issued|No Eligible|Block Limit|Waves" $OUT/ncu-*.txt

#!/bin/bash
# ncu on MobileNetV2's slowest pointwise layers at batch 64: our kernel (rule tile and a forced
# persistent TMA tile) and cuDNN's (NHWC and NCHW) (the GPU tests run apart).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt $OUT/ncu && tar xJf device-bin/gt.tar.xz -C /tmp/gt
lk=/tmp/gt/layoutkit
S="--launch-count 2 --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis"
for spec in "16 112 96" "32 112 16" "960 7 160"; do
  set -- $spec; c=$1; hw=$2; o=$3; tag=$c-$o
  $lk conv bench --device cuda --net mobilenetv2 --layouts NHWC --batch 64 --filter "pw 1x1 $c->$o " --repeats 1 > /dev/null 2>&1  # compile once
  timeout 120 ncu $S $lk conv bench --device cuda --net mobilenetv2 --layouts NHWC --batch 64 --filter "pw 1x1 $c->$o " --repeats 1 > $OUT/ncu/ours-$tag.txt 2>&1
  LAYOUTKIT_CONV_TILE=256x128x3 LAYOUTKIT_CONV_PERSISTENT=1 LAYOUTKIT_CONV_TMA=1 timeout 120 ncu $S $lk conv bench --device cuda --net mobilenetv2 --layouts NHWC --batch 64 --filter "pw 1x1 $c->$o " --repeats 1 > $OUT/ncu/ours-pers-$tag.txt 2>&1
  for L in NHWC NCHW; do
    timeout 120 ncu ${S#--launch-count 2 } --profile-from-start off python3 device-bin/pw_ncu.py 64 $c $hw $o $L > $OUT/ncu/cudnn-$L-$tag.txt 2>&1
  done
done
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu && cd - > /dev/null

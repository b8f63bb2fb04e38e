#!/bin/bash
# Feasibility of the stem as a space-to-depth convolution: the stem and the 4x4 stride-1
# layer over 16 channels it becomes, ours (NHWC) with the rule's and forced tiles, and cuDNN.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/fb && tar xJf device-bin/cli.tar.xz -C /tmp/fb
L=/tmp/fb/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/gpu.txt
STEM="--layer C=3,HW=224,O=64,K=7,S=2,P=3"
IN="--layer C=16,HW=115,O=64,K=4,S=1,P=0"
MB="--layer C=3,HW=224,O=32,K=3,S=2,P=1"
MBIN="--layer C=16,HW=113,O=32,K=2,S=1,P=0"
for b in 1 8 32 64; do
  echo "== batch $b rule"
  $L conv bench --device cuda --layouts NHWC $STEM $IN $MB $MBIN --batch $b --repeats 10 2>&1 | grep -v "^$"
done
for t in 128x64x4 256x64x4 128x64x3 64x64x4 256x64x3 128x32x4; do
  for tma in 0 1; do
    echo "== batch 64 tile $t tma $tma"
    LAYOUTKIT_CONV_TILE=$t LAYOUTKIT_CONV_TMA=$tma $L conv bench --device cuda --layouts NHWC $IN $MBIN --batch 64 --repeats 10 2>&1 | grep -E "C=|error" 
  done
done
python3 bench/torch_conv_bench.py $L --batches 1,8,32,64 --repeats 10 $STEM $MB $IN $MBIN 2>&1 | tail -30

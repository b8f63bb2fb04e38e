#!/bin/bash
# Layers outside the benchmark's three networks against cuDNN's best (fair script): ResNeXt-50
# 32x4d's grouped 3x3 convolutions and EfficientNet-B0's depthwise 5x5 ones, batch 1-64.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/c $OUT && tar xJf device-bin/cur.tar.xz -C /tmp/c
L=""
for g in C=128,HW=56,O=128,K=3,G=32 C=256,HW=56,O=256,K=3,S=2,G=32 C=256,HW=28,O=256,K=3,G=32 C=512,HW=28,O=512,K=3,S=2,G=32 C=512,HW=14,O=512,K=3,G=32 C=1024,HW=14,O=1024,K=3,S=2,G=32 C=1024,HW=7,O=1024,K=3,G=32 \
         C=144,HW=56,O=144,K=5,S=2,G=144 C=240,HW=28,O=240,K=5,G=240 C=672,HW=14,O=672,K=5,G=672 C=672,HW=14,O=672,K=5,S=2,G=672 C=1152,HW=7,O=1152,K=5,G=1152; do
  L="$L --layer $g"
done
timeout 500 python3 bench/torch_conv_bench.py /tmp/c/layoutkit --batches 1,8,32,64 --repeats 10 $L --json $OUT/other.json > $OUT/other.md 2> $OUT/other.err
cat $OUT/other.md | cut -c1-220
tail -3 $OUT/other.err

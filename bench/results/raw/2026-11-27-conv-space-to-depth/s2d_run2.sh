#!/bin/bash
# Space to depth with a thread per regrouped pixel: its GPU test, the A/B on the layers of
# 3 channels (LAYOUTKIT_CONV_SPACE_TO_DEPTH=0 against the rule, same binary, alternated
# twice), the regrouped problems alone (what the pass costs), cuDNN on the same layers.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s2d $OUT/tests && tar xJf device-bin/s2d.tar.xz -C /tmp/s2d
L=/tmp/s2d/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 200 /tmp/s2d/cuda_conv_space_to_depth --nocapture > $OUT/tests/cuda_conv_space_to_depth.log 2>&1; echo "rc=$?" >> $OUT/tests/cuda_conv_space_to_depth.log
grep -E "panicked|test result|checked|rc=" $OUT/tests/cuda_conv_space_to_depth.log
for rep in 1 2; do for b in 1 8 32 64; do for v in 0 1; do
  LAYOUTKIT_CONV_SPACE_TO_DEPTH=$v $L conv bench --device cuda --net all --layouts NHWC,NCHW --batch $b --filter "3->" --repeats 10 2>/dev/null | grep "@" | sed "s/^/s2d=$v b$b /"
done; done; done > $OUT/ab.txt
for b in 1 8 32 64; do
  $L conv bench --device cuda --layouts NHWC --layer C=16,HW=115,O=64,K=4,S=1,P=0 --layer C=16,HW=113,O=32,K=2,S=1,P=0 --batch $b --repeats 10 2>/dev/null | grep "@" | sed "s/^/inner b$b /"
done > $OUT/inner.txt
grep -v conv1_1 $OUT/ab.txt | sort -k1,1 -k3,3 -s | sed "s/   */ /g"
cat $OUT/inner.txt
python3 bench/torch_conv_bench.py $L --batches 1,8,32,64 --repeats 10 --net all --filter "3->" --json $OUT/fair.json > $OUT/fair.md 2> $OUT/fair.err
grep -E "^batch|^worst" $OUT/fair.md

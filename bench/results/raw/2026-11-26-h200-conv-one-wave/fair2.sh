#!/bin/bash
# The one-wave tile's check against PyTorch, the kernels it names, then the fair benchmark.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
python3 device-bin/check_one_wave.py device-bin/layoutkit > $OUT/check-one-wave.txt 2>&1; echo "check rc=$?"
for spec in "32|l4 1x1 2048->512" "1|vgg conv3_2" "8|l2 3x3/2" "8|l4 1x1/2" "16|l3 3x3/2"; do
  device-bin/layoutkit conv bench --device cuda --net all --layouts NHWC --batch ${spec%%|*} --filter "${spec#*|}" --repeats 10 2>/dev/null | grep "@" >> $OUT/check-one-wave.txt
done
cat $OUT/check-one-wave.txt
python3 bench/torch_conv_bench.py device-bin/layoutkit --batches 1,8,32,64 --repeats 10 --net all --json $OUT/fair.json > $OUT/fair.md 2> $OUT/fair.err
echo "fair rc=$?"
grep -E "^batch|worst ten" $OUT/fair.md

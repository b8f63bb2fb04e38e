#!/bin/bash
# Space to depth: its GPU test, then the A/B (LAYOUTKIT_CONV_SPACE_TO_DEPTH=0 against the
# rule, same binary, alternated twice) on the layers of 3 channels, the fair comparison with
# cuDNN on them, then cuda_conv's random problems.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s2d $OUT/tests && tar xJf device-bin/s2d.tar.xz -C /tmp/s2d
L=/tmp/s2d/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 200 /tmp/s2d/cuda_conv_space_to_depth --nocapture > $OUT/tests/cuda_conv_space_to_depth.log 2>&1; echo "rc=$?" >> $OUT/tests/cuda_conv_space_to_depth.log
tail -3 $OUT/tests/cuda_conv_space_to_depth.log; grep -c "relative error\|exact" $OUT/tests/cuda_conv_space_to_depth.log
for rep in 1 2; do for b in 1 8 32 64; do for v in 0 1; do
  LAYOUTKIT_CONV_SPACE_TO_DEPTH=$v $L conv bench --device cuda --net all --layouts NHWC,NCHW --batch $b --filter "3->" --repeats 10 2>/dev/null | grep "@" | sed "s/^/s2d=$v b$b /"
done; done; done | tee $OUT/ab.txt
python3 bench/torch_conv_bench.py $L --batches 1,8,32,64 --repeats 10 --net all --filter "3->" --json $OUT/fair.json > $OUT/fair.md 2> $OUT/fair.err
grep -E "^batch|^worst" $OUT/fair.md
timeout 250 /tmp/s2d/cuda_conv random_problems --nocapture > $OUT/tests/cuda_conv_random.log 2>&1; echo "rc=$?" >> $OUT/tests/cuda_conv_random.log
tail -4 $OUT/tests/cuda_conv_random.log; grep -c "space-to-depth" $OUT/tests/cuda_conv_random.log

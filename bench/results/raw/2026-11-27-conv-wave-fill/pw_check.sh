#!/bin/bash
# The pointwise rule: the TMA kernel's GPU test binary (narrow rows, the 256 x 96 and 256 x 32
# tiles), then the changed layers with the rule (no forcing), GPU time.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/pw && tar xJf device-bin/pw.tar.xz -C /tmp/pw
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
( start=$(date +%s); /tmp/pw/cuda_conv_persistent --nocapture --test-threads=4 > $OUT/persistent-tests.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/persistent-tests.log )
grep "test result\|rc=\|checked\|panicked" $OUT/persistent-tests.log
for b in 8 32 64; do for f in "pw 1x1 16->96 " "pw 1x1 32->16 " "pw 1x1 32->192 "; do
  /tmp/pw/layoutkit conv bench --device cuda --net mobilenetv2 --layouts NHWC --types f16 --batch $b --filter "$f" --repeats 10 2>&1 | grep "pw 1x1" | sed "s/^/b$b /"
done; done

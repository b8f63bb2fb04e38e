#!/bin/bash
# The unpadded K walk only where it saves two steps: the 3x3 layers of 3 channels back on
# padded chunks. Check against PyTorch, then the build before (layoutkit-old) and after
# (layoutkit) alternated on the three C = 3 layers, NHWC, batch 1-64.
tar xJf device-bin/bins.tar.xz -C device-bin
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
cat device-bin/BUILD >> $OUT/gpu.txt
python3 device-bin/check_dense.py device-bin/layoutkit 2>&1 | tee $OUT/check.txt
for rep in 1 2; do for b in 1 8 32 64; do
  for v in old new; do
    lk=device-bin/layoutkit; [ $v = old ] && lk=device-bin/layoutkit-old
    $lk conv bench --device cuda --net all --layouts NHWC --batch $b --filter "3->" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
  done
done; done | tee $OUT/ab.txt

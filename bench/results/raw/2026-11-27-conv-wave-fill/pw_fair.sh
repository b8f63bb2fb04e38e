#!/bin/bash
# The fair comparison (cuDNN's best layout, both sides GPU time) on the pointwise layers the
# pointwise rule moves, batch 8, 32 and 64.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/pw && tar xJf device-bin/pw.tar.xz -C /tmp/pw
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in "pw 1x1 16->96 " "pw 1x1 32->16 " "pw 1x1 32->192 "; do
  python3 bench/torch_conv_bench.py /tmp/pw/layoutkit --batches 8,32,64 --repeats 10 --net mobilenetv2 --filter "$f" 2>/dev/null | grep "@"
done

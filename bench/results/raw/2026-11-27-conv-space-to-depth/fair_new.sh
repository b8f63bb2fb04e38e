#!/bin/bash
# The fair benchmark (three networks, batch 1-64) and int8 on the 3x3 layers at batch 64.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/fb && tar xJf device-bin/new.tar.xz -C /tmp/fb
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
git log --oneline -1 >> $OUT/gpu.txt 2>/dev/null
python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())" >> $OUT/gpu.txt
python3 bench/torch_conv_bench.py /tmp/fb/layoutkit --batches 1,8,32,64 --repeats 10 --net all --json $OUT/fair.json > $OUT/fair.md 2> $OUT/fair.err
/tmp/fb/layoutkit conv bench --device cuda --filter 3x3 --types f16,i8,i8q --layouts NHWC,NC/32HW32 --batch 64 --repeats 10 --json > $OUT/int8-3x3-b64.json 2> $OUT/int8.err
grep -E "^batch|^worst" $OUT/fair.md

#!/bin/bash
# The fair benchmark against cuDNN (CUDA graphs) and int8 on the 3x3 layers, this build.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt && tar xJf device-bin/gt.tar.xz -C /tmp/gt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())" >> $OUT/gpu.txt
/tmp/gt/layoutkit conv bench --device cuda --filter 3x3 --types f16,i8,i8q --layouts NHWC,NC/32HW32 --batch 64 --repeats 10 --json > $OUT/int8-3x3-b64.json 2> $OUT/int8.err
echo "int8 rc=$?"
python3 bench/torch_conv_bench.py /tmp/gt/layoutkit --batches 1,8,32,64 --repeats 10 --net all --json $OUT/fair.json > $OUT/fair.md 2> $OUT/fair.err
echo "fair rc=$?"
tail -40 $OUT/fair.md

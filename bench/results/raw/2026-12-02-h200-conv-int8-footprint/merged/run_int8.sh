#!/usr/bin/env bash
# The int8 GPU test on the merged build (the NHWC footprint rule routes some int8 problems through it).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc LAYOUTKIT_REQUIRE_CUDA=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/gpu.txt
t0=$(date +%s); timeout 500 ./cuda_conv_int8 --test-threads 8 > $OUT/cuda_conv_int8.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - t0 ))" >> $OUT/cuda_conv_int8.log
tail -5 $OUT/cuda_conv_int8.log

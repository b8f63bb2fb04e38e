#!/bin/bash
# Every GPU test binary of the build in BUILD, side by side (each compiles its kernels with
# NVRTC on its own CPU core); logs under $OUT/tests.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt $OUT/tests && tar xJf device-bin/new.tar.xz -C /tmp/gt
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat device-bin/BUILD; } > $OUT/tests/gpu.txt
for t in cuda_conv cuda_conv_int8 cuda_conv_nchw cuda_conv_nchw_loader cuda_conv_persistent cuda_vs_reference cuda_conv_space_to_depth cuda_conv_supergroups; do
  ( start=$(date +%s); timeout 560 /tmp/gt/$t --nocapture --test-threads=8 > $OUT/tests/$t.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/tests/$t.log ) &
done
wait
cat $OUT/tests/gpu.txt
grep -H "test result\|rc=" $OUT/tests/*.log

#!/bin/bash
# The GPU tests the last changes touch (super-groups, grouped, random problems, NCHW planning),
# side by side; logs under $OUT.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt $OUT && tar xJf device-bin/new.tar.xz -C /tmp/gt
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat device-bin/BUILD; } > $OUT/gpu.txt
run() { ( start=$(date +%s); timeout 400 /tmp/gt/$1 $2 --nocapture --test-threads=8 > $OUT/$3.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/$3.log ) & }
run cuda_conv_supergroups "" supergroups
run cuda_conv grouped grouped
run cuda_conv random random
run cuda_conv_nchw "" nchw
wait
cat $OUT/gpu.txt
grep -H "test result\|rc=\|checked" $OUT/*.log

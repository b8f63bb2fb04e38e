#!/bin/bash
# The GPU tests of the convolution not run in run3, on the merged build (main): the fixed
# problems of cuda_conv (first and last cases), NCHW planning, super-groups, space to depth,
# each against the CPU reference, in parallel (kernels compile through NVRTC on first use).
# usage (device machine, repository root): bash .../run4/run.sh; binaries in device-bin/t4/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 LAYOUTKIT_CACHE_DIR=/tmp/kc LAYOUTKIT_REQUIRE_CUDA=1
D=device-bin/t4; R=$OUT; s=$(date +%s); P=""
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
run() { name=$1; shift; ( timeout 540 "$@" > $R/$name.log 2>&1; echo "rc=$?" >> $R/$name.log ) & P="$P $!"; }
run first $D/cuda_conv first_cases --test-threads 2
run last $D/cuda_conv last_cases --test-threads 2
run depthwise_grouped $D/cuda_conv depthwise grouped --test-threads 2
run nchw $D/cuda_conv_nchw --test-threads 2
run supergroups $D/cuda_conv_supergroups --test-threads 2
run s2d $D/cuda_conv_space_to_depth --test-threads 2
wait $P
echo "elapsed $(( $(date +%s) - s )) s" > $R/summary.txt
for f in $R/*.log; do echo "== $(basename $f)"; grep -E "test result|rc=|panicked|FAILED" $f | head -6; done >> $R/summary.txt
cat $R/summary.txt

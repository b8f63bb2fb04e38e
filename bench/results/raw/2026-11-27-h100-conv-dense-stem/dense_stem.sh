#!/bin/bash
# The stem with K walked densely (147 elements in 3 steps) against 7 padded steps: the
# build before (device-bin/layoutkit) and after (gt-dense.tar.xz), alternated; a check against
# PyTorch; then the GPU tests that run C < 8 problems.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gd $OUT/tests && tar xJf device-bin/gt-dense.tar.xz -C /tmp/gd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 device-bin/check_dense.py /tmp/gd/layoutkit 2>&1 | tee $OUT/check-dense.txt
for rep in 1 2; do for b in 1 8 32 64; do for L in NHWC NCHW; do
  for v in before after; do
    lk=device-bin/layoutkit; [ $v = after ] && lk=/tmp/gd/layoutkit
    $lk conv bench --device cuda --net resnet50 --layouts $L --batch $b --filter "conv1 7x7" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b $L /"
  done
done; done; done | tee $OUT/stem-ab.txt
for t in "cuda_conv tensor_core_convolution_matches_the_reference_last_cases" "cuda_conv random_problems_match_the_reference" "cuda_vs_reference" "cuda_conv_nchw" "cuda_conv_nchw_loader"; do
  set -- $t
  ( start=$(date +%s); /tmp/gd/$1 $2 --nocapture --test-threads=8 > $OUT/tests/$1-${2:-all}.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/tests/$1-${2:-all}.log ) &
done
wait
grep -H "test result\|rc=" $OUT/tests/*.log
cd $OUT && tar czf tests.tgz tests && rm -rf tests

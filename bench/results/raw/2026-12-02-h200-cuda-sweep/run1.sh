#!/usr/bin/env bash
# First H200 call: the GPU reference test of this build, then the whole CUDA sweep with the
# build before (base, main's build) and this build (steps) alternated, first pass.
# Binaries (stripped) come in the folder of this script (carried): lk-base, lk-steps, cuda_vs_reference-steps.
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 150 $B/cuda_vs_reference-steps --test-threads 3 > $R/steps-cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $R/steps-cuda_vs_reference.log
for b in base steps; do
  timeout 200 $B/lk-$b bench --sweep --device cuda --repeats 5 --json > $R/sweep-$b-1.json 2> $R/sweep-$b-1.err
  echo "pass 1 $b rc=$? $(( $(date +%s) - s )) s"
done
cd $OUT && tar czf run1.tgz r && rm -rf r

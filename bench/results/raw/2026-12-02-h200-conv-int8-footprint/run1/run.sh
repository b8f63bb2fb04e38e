#!/usr/bin/env bash
# First H200 call: the footprint kernel's GPU tests, then the 3x3 layers at batch 64 with the
# build before (base) and this one with the footprint kernel wherever it applies (=1) and never (=0).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc LAYOUTKIT_REQUIRE_CUDA=1
chmod +x ./*
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee $OUT/gpu.txt
s=$(date +%s)
timeout 240 ./cuda_conv_footprint --test-threads 4 > $OUT/footprint-tests.log 2>&1
echo "footprint tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $OUT/footprint-tests.log
grep -E "test result|panicked|not exact|error" $OUT/footprint-tests.log | head -20
B="conv bench --device cuda --filter 3x3 --types f16,i8,i8q --layouts NHWC --batch 64 --repeats 10 --json"
for pass in 1; do
  timeout 100 ./layoutkit-base $B > $OUT/bench-base-$pass.json 2> $OUT/bench-base-$pass.err; echo "base $pass rc=$? $(( $(date +%s) - s )) s"
  LAYOUTKIT_CONV_FOOTPRINT=1 timeout 100 ./layoutkit-new $B > $OUT/bench-fp1-$pass.json 2> $OUT/bench-fp1-$pass.err; echo "fp1 $pass rc=$? $(( $(date +%s) - s )) s"
  LAYOUTKIT_CONV_FOOTPRINT=0 timeout 100 ./layoutkit-new $B > $OUT/bench-fp0-$pass.json 2> $OUT/bench-fp0-$pass.err; echo "fp0 $pass rc=$? $(( $(date +%s) - s )) s"
done
# (then a table of the JSON files, as in run5.sh)

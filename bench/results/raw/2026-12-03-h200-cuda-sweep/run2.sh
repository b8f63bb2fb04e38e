#!/usr/bin/env bash
# Second H200 call: the GPU reference test of the final build, then the build before (base)
# and the final build over the casts into NCHW32c (whose kernels the final rule returns to
# the base's for 1000 channels), alternated over two rounds. Binaries come in the folder of
# this script.
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu2.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 170 $B/cuda_vs_reference-final --test-threads 3 > $R/final-cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $R/final-cuda_vs_reference.log
for round in 1 2; do
  if [ $round = 1 ]; then order="base final"; else order="final base"; fi
  for b in $order; do
    t0=$(date +%s)
    timeout 75 $B/lk-$b bench --sweep --device cuda --repeats 5 --json --sweep-filter "NCHW->NCHW32c f32>" > $R/fam-$b-$round-0.json 2>/dev/null
    echo "$round $b rc=$? $(( $(date +%s) - t0 )) s" >> $R/passes.txt
  done
done
cd $OUT && gzip r/fam-*.json; tar czf run2.tgz r && rm -rf r

#!/usr/bin/env bash
# First H200 call: the GPU reference test of the thin build, then the build before (base,
# bf2d6e4) and the thin build (thin) over the sweep's families whose kernels the thin build
# changes, one pass of each build per family and round (round 1 base first, round 2 thin
# first), none started past 520 s. Binaries come in the folder of this script.
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 170 $B/cuda_vs_reference-thin --test-threads 3 > $R/thin-cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $R/thin-cuda_vs_reference.log
F=("NCHW->NCHW32c" "NCHW->NHWC" "NHWC->NCHW" "NCHW->kHWC8" "mace:in_out_width W=1024" "mace:in_out_height H=1024")
for round in 1 2; do
  if [ $round = 1 ]; then order="base thin"; else order="thin base"; fi
  for i in "${!F[@]}"; do
    for b in $order; do
      [ $(date +%s) -gt $((s + 520)) ] && { echo "skipped $round $b ${F[$i]}" >> $R/skipped.txt; continue; }
      t0=$(date +%s)
      timeout 75 $B/lk-$b bench --sweep --device cuda --repeats 5 --json --sweep-filter "${F[$i]}" > $R/fam-$b-$round-$i.json 2>/dev/null
      echo "$round $b ${F[$i]} rc=$? $(( $(date +%s) - t0 )) s" >> $R/passes.txt
    done
  done
done
echo "families done $(( $(date +%s) - s )) s" >> $R/passes.txt
cd $OUT && gzip r/fam-*.json; tar czf run1.tgz r && rm -rf r

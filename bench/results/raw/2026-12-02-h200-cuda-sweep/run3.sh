#!/usr/bin/env bash
# Third H200 call: the GPU reference test of the final build, then the final build (final)
# and the build before (base) over the sweep's families whose kernels the final build
# changes, one pass of each build per family (final first), none started past 280 s. Binaries come in the folder
# of this script.
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu3.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 160 $B/cuda_vs_reference-final --test-threads 3 > $R/final-cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $R/final-cuda_vs_reference.log
F=("NCHW->NCHW32c i8" "NHWC->mace:in_out_channel f16" "NHWC->mace:in_out_channel f32" "NHWC->mace:in_out_height f16" "NHWC->mace:in_out_height f32" "NHWC->mace:in_out_width f16" "NHWC->mace:in_out_width f32" "OIHW->OIHW16i16o f16" "OIHW->OIHW16i16o f32" "OIHW->mace:conv2d_filter f16" "OIHW16i16o->OIHW f16" "OIHW16i16o->OIHW f32" "mace:conv2d_filter->OIHW f16" "mace:conv2d_filter->OIHW f32" "mace:in_out_channel->NHWC f16" "mace:in_out_channel->NHWC f32" "mace:in_out_height->NHWC f16" "mace:in_out_height->NHWC f32" "mace:in_out_width->NHWC f16" "mace:in_out_width->NHWC f32" )
for i in "${!F[@]}"; do
  for b in final base; do
    [ $(date +%s) -gt $((s + 280)) ] && { echo "skipped $b ${F[$i]}"; continue; }
    timeout 40 $B/lk-$b bench --sweep --device cuda --repeats 5 --json --sweep-filter "${F[$i]}" > $R/fam-$b-1-$i.json 2>/dev/null
  done
done
echo "families done $(( $(date +%s) - s )) s"
cd $OUT && tar czf run3.tgz r && rm -rf r

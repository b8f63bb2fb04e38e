#!/usr/bin/env bash
# Second H200 call: the GPU reference test of the word tiles, then the build before (base)
# and the word tiles (words) alternated twice over the sweep's families whose kernels change.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
for f in *.xz; do xz -dk -T4 "$f"; done; chmod +x lk-* cuda_vs_reference-*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 ./cuda_vs_reference-words --test-threads 1 > $R/words-cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $R/words-cuda_vs_reference.log
F=("NCHW->NCHW32c f16" "NCHW->NCHW32c i8" "NCHW->NHWC f16" "NCHW->NHWC i8" "NCHW->kHWC8 f16"
   "NCHW32c->NCHW f16" "NCHW32c->NCHW i8" "NHWC->NCHW f16" "NHWC->NCHW i8"
   "NHWC->mace:in_out_height f16" "NHWC->mace:in_out_width f16" "kHWC8->NCHW f16" "mace:in_out_width->NHWC f16")
for pass in 1 2; do
  for b in base words; do
    for i in "${!F[@]}"; do
      ./lk-$b bench --sweep --device cuda --repeats 5 --json --sweep-filter "${F[$i]}" > $R/fam-$b-$pass-$i.json 2>/dev/null
    done
    echo "pass $pass $b $(( $(date +%s) - s )) s"
  done
done
cd $OUT && tar czf results.tgz r && rm -rf r

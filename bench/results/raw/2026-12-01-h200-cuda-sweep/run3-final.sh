#!/usr/bin/env bash
# Third H200 call: the GPU reference test of the final build (word tiles for 1-byte
# destinations, padded rows too), the build before (base) and the final build alternated
# twice over the NCHW -> NCHW32c families of 1-byte destinations, then one whole sweep of
# the final build.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
for f in *.xz; do xz -dk -T4 "$f"; done; chmod +x lk-* cuda_vs_reference-*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 ./cuda_vs_reference-final --test-threads 3 > $R/final-cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $R/final-cuda_vs_reference.log
for pass in 1 2; do
  for b in base final; do
    ./lk-$b bench --sweep --device cuda --repeats 5 --json --sweep-filter "NCHW->NCHW32c i8" > $R/fam-$b-$pass-0.json 2>/dev/null
    echo "pass $pass $b $(( $(date +%s) - s )) s"
  done
done
timeout 300 ./lk-final bench --sweep --device cuda --repeats 5 --json > $R/sweep-final-1.json 2> $R/sweep-final-1.err
echo "sweep final rc=$? $(( $(date +%s) - s )) s"
gzip -9 $R/sweep-final-1.json
cd $OUT && tar czf results.tgz r && rm -rf r

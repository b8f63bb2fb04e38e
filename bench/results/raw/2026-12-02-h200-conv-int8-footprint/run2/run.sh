#!/usr/bin/env bash
# Second H200 call: ptxas on the footprint kernels' sources; the 3x3 layers at batch 64, the
# build before (base) and this one with the footprint kernel wherever it applies (fp1),
# alternated twice; tiles forced on l1 and l2 @28; then the footprint kernel's GPU tests.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc LAYOUTKIT_REQUIRE_CUDA=1
export PATH=/usr/local/cuda/bin:$PATH
chmod +x ./* 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
s=$(date +%s)
( for f in src/*.cu; do echo "== $f"; timeout 120 nvcc -arch=sm_90a -Xptxas -v -cubin -o /tmp/x.cubin $f 2>&1 | grep -E "registers|spill|C7513|error|warning: .*wgmma" ; done ) > $OUT/ptxas.txt 2>&1 &
B="conv bench --device cuda --filter 3x3 --types f16,i8,i8q --layouts NHWC --batch 64 --repeats 10 --json"
for pass in 1 2; do
  timeout 100 ./layoutkit-base $B > $OUT/bench-base-$pass.json 2> /tmp/base-$pass.err; echo "base $pass rc=$? $(( $(date +%s) - s )) s"
  LAYOUTKIT_CONV_FOOTPRINT=1 timeout 100 ./layoutkit-new $B > $OUT/bench-fp1-$pass.json 2> /tmp/fp1-$pass.err; echo "fp1 $pass rc=$? $(( $(date +%s) - s )) s"
done
forced() { # filter tile persistent
  LAYOUTKIT_CONV_FOOTPRINT=1 LAYOUTKIT_CONV_TILE=$2 LAYOUTKIT_CONV_PERSISTENT=$3 timeout 60 ./layoutkit-new conv bench --device cuda --filter "$1" --types i8,i8q --layouts NHWC --batch 64 --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|ERR'); sys.exit()
for r in d['results']: print('$2|$3|%s|%s|%.1f|%s' % (r['layer'], r.get('dtype'), r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
{
for f in "l1 3x3" "l2 3x3 128->128 @28"; do
  for t in 256x64x4 256x64x8 192x64x6 128x64x8 64x64x8 192x128x4 128x128x4 64x128x6; do forced "$f" $t ""; forced "$f" $t 0; done
done
} > $OUT/forced.txt 2>&1
wait
timeout 200 ./cuda_conv_footprint --test-threads 4 > $OUT/footprint-tests.log 2>&1
echo "footprint tests rc=$? in $(( $(date +%s) - s )) s" | tee -a $OUT/footprint-tests.log

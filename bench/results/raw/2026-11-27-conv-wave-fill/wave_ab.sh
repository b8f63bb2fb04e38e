#!/bin/bash
# The fuller-wave tiles: the new test on the GPU, then the layers the rule moves, the build
# before (old, gt.tar.xz) and after (new) alternated twice, GPU time; then cuDNN on them.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/old /tmp/new && tar xJf device-bin/gt.tar.xz -C /tmp/old && tar xJf device-bin/new.tar.xz -C /tmp/new
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
( start=$(date +%s); /tmp/new/cuda_conv_persistent --nocapture --test-threads=4 > $OUT/persistent-tests.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/persistent-tests.log )
grep "test result\|rc=\|checked" $OUT/persistent-tests.log
run() { # build batch filter types
  timeout 120 /tmp/$1/layoutkit conv bench --device cuda --net all --layouts NHWC --types $4 --batch $2 --filter "$3" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|ERR'); sys.exit()
for r in d['results']: print('$1|$2|%s|%s|%.1f|%s' % (r['layer'], r.get('dtype'), r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for pass in 1 2; do for build in old new; do
  for b in 32 64; do
    run $build $b "l4 1x1 512->2048" f16,i8,i8q
    run $build $b "l4 1x1/2 1024->2048" f16,i8,i8q
    run $build $b "pw 1x1 160->960 " f16
  done
  for b in 96 128; do run $build $b "pw 1x1 160->960 " f16; done
done; done
for f in "l4 1x1 512->2048" "l4 1x1/2 1024->2048" "pw 1x1 160->960 "; do
  python3 bench/torch_conv_bench.py /tmp/new/layoutkit --batches 32,64 --repeats 10 --net all --filter "$f" 2>/dev/null | grep "@"
done

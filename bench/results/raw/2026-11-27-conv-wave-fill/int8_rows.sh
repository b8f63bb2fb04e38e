#!/bin/bash
# int8 3x3 layers of 64 channels in the TMA kernel with 64-byte rows: tiles forced (TMA,
# persistent) against the rule's cp.async tile, batch 64; f16 pointwise layers of 16-32
# channels with 32/64-byte rows, tiles forced; then the GPU test binary of the TMA kernel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/new && tar xJf device-bin/new.tar.xz -C /tmp/new
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { # batch filter types net tile persistent
  LAYOUTKIT_CONV_TMA=${5:+1} LAYOUTKIT_CONV_TILE=$5 LAYOUTKIT_CONV_PERSISTENT=$6 timeout 120 /tmp/new/layoutkit conv bench --device cuda --net $4 --layouts NHWC --types $3 --batch $1 --filter "$2" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$5|$6|ERR'); sys.exit()
for r in d['results']: print('$1|$5|$6|%s|%s|%.1f|%s' % (r['layer'], r.get('dtype'), r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for f in "l1 3x3" "conv1_2" "conv2_1"; do
  run 64 "$f" i8,i8q all "" ""
  for t in 256x64x4 128x64x4 128x64x6 64x64x8 192x128x4 128x128x4; do run 64 "$f" i8,i8q all $t ""; run 64 "$f" i8,i8q all $t 1; done
done
for f in "pw 1x1 16->96 " "pw 1x1 32->192 " "pw 1x1 24->144 "; do
  run 64 "$f" f16 mobilenetv2 "" ""
  for t in 256x96x3 128x96x4 192x96x4 128x192x4 256x160x3 128x160x4; do run 64 "$f" f16 mobilenetv2 $t 1; done
done
( start=$(date +%s); /tmp/new/cuda_conv_persistent --nocapture --test-threads=4 > $OUT/persistent-tests.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/persistent-tests.log )
grep "test result\|rc=\|checked\|panicked" $OUT/persistent-tests.log

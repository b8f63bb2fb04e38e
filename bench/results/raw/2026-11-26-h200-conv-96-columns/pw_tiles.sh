#!/bin/bash
# MobileNetV2's worst pointwise layers at batch 64 (f16 NHWC): forced tiles, persistent blocks
# and TMA loads against the rule. One line per run: filter tile persistent tma TFLOP/s kernel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt && tar xJf device-bin/gt.tar.xz -C /tmp/gt
lk=/tmp/gt/layoutkit
run() { # filter tile persistent tma
  LAYOUTKIT_CONV_TILE=$2 LAYOUTKIT_CONV_PERSISTENT=$3 LAYOUTKIT_CONV_TMA=$4 timeout 60 $lk conv bench --device cuda --net mobilenetv2 --layouts NHWC --batch 64 --filter "$1" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|$4|ERR'); sys.exit()
for r in d['results']: print('$1|$2|$3|$4|%s|%.1f|%s' % (r['layer'], r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:80]))"
}
for f in "pw 1x1 16->96 " "pw 1x1 32->16 " "pw 1x1 32->192 " "pw 1x1 960->160 " "pw 1x1 160->960 "; do
  run "$f" "" "" ""
  run "$f" "" 1 ""
  run "$f" "" "" 1
  run "$f" "" 1 1
  for t in 64x64x4 64x96x4 128x96x4 128x64x4 256x64x4 128x128x4 256x128x4 64x128x4 128x32x4 64x32x4; do
    run "$f" $t "" ""
    run "$f" $t 1 1
  done
done

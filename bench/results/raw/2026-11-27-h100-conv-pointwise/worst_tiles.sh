#!/bin/bash
# Forced tiles on the layers furthest under cuDNN at batch 32 and 64 (f16 NHWC, GPU time).
# One line per run: batch|layer filter|tile|persistent|tma|splits|layer|TFLOP/s|kernel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt && tar xJf device-bin/gt.tar.xz -C /tmp/gt
lk=/tmp/gt/layoutkit
run() { # batch filter tile persistent tma splits
  LAYOUTKIT_CONV_TILE=$3 LAYOUTKIT_CONV_PERSISTENT=$4 LAYOUTKIT_CONV_TMA=$5 LAYOUTKIT_CONV_SPLITK=$6 timeout 60 $lk conv bench --device cuda --net all --layouts NHWC --batch $1 --filter "$2" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|$4|$5|$6|ERR'); sys.exit()
for r in d['results']: print('$1|$2|$3|$4|$5|$6|%s|%.1f|%s' % (r['layer'], r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for b in 64 32; do
  f="pw 1x1 960->160 "
  run $b "$f" "" "" "" ""
  for t in 64x96x4 64x160x4 64x128x4 64x64x4 128x160x3 128x96x4 64x96x6 64x160x6 64x64x6; do run $b "$f" $t "" 1 ""; done
  run $b "$f" 64x160x4 "" 1 2; run $b "$f" 128x160x4 "" 1 2; run $b "$f" 128x160x4 "" 1 3; run $b "$f" 64x96x4 "" 1 2
  f="pw 1x1 16->96 "
  run $b "$f" "" "" "" ""
  for t in 256x96x3 192x96x4 192x96x3 128x96x4 128x96x3; do run $b "$f" $t 1 1 ""; done
  for t in 128x96x2 64x96x2 64x96x3; do run $b "$f" $t "" 0 ""; done
  f="pw 1x1 32->16 "
  run $b "$f" "" "" "" ""
  for t in 256x32x4 256x32x3 192x32x4 128x32x4; do run $b "$f" $t 1 1 ""; done
  for t in 128x32x2 64x32x2 64x32x4 256x32x3; do run $b "$f" $t "" 0 ""; done
  f="conv1 7x7"
  run $b "$f" "" "" "" ""
  for t in 128x64x2 128x64x4 64x64x4 256x64x3 128x128x3 256x64x4; do run $b "$f" $t "" "" ""; done
  f="l4 1x1 512->2048"
  run $b "$f" "" "" "" ""
  for t in 192x128x4 128x256x4 128x128x4 256x128x4 128x128x3; do run $b "$f" $t "" 1 ""; run $b "$f" $t 1 1 ""; done
  f="l4 1x1 2048->512"
  run $b "$f" "" "" "" ""
  for t in 64x128x4 64x64x4 128x128x4 192x128x4 64x128x6; do run $b "$f" $t "" 1 ""; done
  run $b "$f" 128x128x4 "" 1 2; run $b "$f" 256x128x4 "" 1 4; run $b "$f" 128x256x4 "" 1 4
done
for f in "pw 1x1 960->160 " "pw 1x1 16->96 " "pw 1x1 32->16 " "conv1 7x7" "l4 1x1 512->2048" "l4 1x1 2048->512"; do
  python3 bench/torch_conv_bench.py $lk --batches 32,64 --repeats 10 --net all --filter "$f" 2>/dev/null | grep "^| *[0-9]\|^|.*@" | head -6
done

#!/bin/bash
# The layers under 85% of cuDNN at batch 8 and 32 on the H200 (f16 NHWC): forced tiles and
# splits against the rule. One line per run: batch|filter|tile|split|TFLOP/s|kernel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
lk=device-bin/layoutkit
run() { # batch filter tile split
  LAYOUTKIT_CONV_TILE=$3 LAYOUTKIT_CONV_SPLITK=$4 timeout 60 $lk conv bench --device cuda --net all --layouts NHWC --batch $1 --filter "$2" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|$4|ERR'); sys.exit()
for r in d['results']: print('$1|$2|$3|$4|%.1f|%s' % (r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for spec in "8|l4 1x1 1024->512" "8|vgg conv5_1" "8|l3 1x1 1024->256" "32|l4 1x1 2048->512" "32|l3 1x1 512->256" "32|l4 3x3/2"; do
  b=${spec%%|*}; f=${spec#*|}
  run $b "$f" "" ""
  for t in 64x64x4 64x128x4 128x64x4 128x128x4 128x128x3 192x128x4 256x128x4; do
    for s in 1 2 4; do run $b "$f" $t $s; done
  done
done

#!/bin/bash
# Forced tiles (64 x 256, 128 x 192, 64 x 192) on the 1x1 layers whose tiles fill the last wave
# badly, f16 NHWC, GPU time; then cuDNN on the same layers (fair script). One line per run:
# batch|filter|tile|persistent|layer|TFLOP/s|kernel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt && tar xJf device-bin/gt.tar.xz -C /tmp/gt
lk=/tmp/gt/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { # batch filter tile persistent
  LAYOUTKIT_CONV_TILE=$3 LAYOUTKIT_CONV_PERSISTENT=$4 LAYOUTKIT_CONV_TMA=${3:+1} timeout 60 $lk conv bench --device cuda --net all --layouts NHWC --batch $1 --filter "$2" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|$4|ERR'); sys.exit()
for r in d['results']: print('$1|$2|$3|$4|%s|%.1f|%s' % (r['layer'], r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for b in 64 32; do
  for f in "l4 1x1 512->2048" "pw 1x1 160->960 " "l4 1x1/2 1024->2048" "l3 1x1 256->1024"; do
    run $b "$f" "" ""
    for t in 64x256x4 64x256x5 128x192x4 64x192x4; do run $b "$f" $t ""; run $b "$f" $t 1; done
    run $b "$f" "" ""
  done
done
for f in "l4 1x1 512->2048" "pw 1x1 160->960 " "l4 1x1/2 1024->2048" "l3 1x1 256->1024"; do
  python3 bench/torch_conv_bench.py $lk --batches 32,64 --repeats 10 --net all --filter "$f" 2>/dev/null | grep "@"
done

#!/bin/bash
# f16 pointwise layers of 16-32 channels (one K step; TMA rows of 32 or 64 bytes): the rule's
# tile against the TMA kernel forced with persistent blocks, batch 8-128, GPU time.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/new && tar xJf device-bin/new.tar.xz -C /tmp/new
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { # batch filter tile persistent
  LAYOUTKIT_CONV_TMA=${3:+1} LAYOUTKIT_CONV_TILE=$3 LAYOUTKIT_CONV_PERSISTENT=$4 timeout 60 /tmp/new/layoutkit conv bench --device cuda --net mobilenetv2 --layouts NHWC --types f16 --batch $1 --filter "$2" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|$4|ERR'); sys.exit()
for r in d['results']: print('$1|$3|$4|%s|%.1f|%s' % (r['layer'], r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for b in 64 32 8 128; do
  run $b "pw 1x1 16->96 " "" ""; for t in 256x96x3 128x96x4 256x96x4; do run $b "pw 1x1 16->96 " $t 1; done
  run $b "pw 1x1 32->192 " "" ""; for t in 256x96x3 128x96x4 128x192x4 256x192x3; do run $b "pw 1x1 32->192 " $t 1; done
  run $b "pw 1x1 24->144 " "" ""; for t in 256x160x3 128x160x4 256x96x3 128x96x4; do run $b "pw 1x1 24->144 " $t 1; done
  run $b "pw 1x1 32->16 " "" ""; for t in 256x32x4 128x32x4; do run $b "pw 1x1 32->16 " $t 1; done
done

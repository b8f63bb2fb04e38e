#!/usr/bin/env bash
# Fourth H200 call: two blocks per SM for small footprint tiles and the producer warpgroup's
# registers to the consumers (setmaxnreg) for 192-row tiles: ptxas, tiles forced on l1 and l2 @28.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
export PATH=/usr/local/cuda/bin:$PATH
chmod +x ./* 2>/dev/null
s=$(date +%s)
( for f in src/*.cu; do echo "== $f"; timeout 120 nvcc -arch=sm_90a -Xptxas -v -cubin -o /tmp/x.cubin $f 2>&1 | grep -E "registers|spill|C75|error" ; done ) > $OUT/ptxas.txt 2>&1 &
forced() { # filter tile persistent (as in run2)
  LAYOUTKIT_CONV_FOOTPRINT=1 LAYOUTKIT_CONV_TILE=$2 LAYOUTKIT_CONV_PERSISTENT=$3 timeout 60 ./layoutkit-new conv bench --device cuda --filter "$1" --types i8,i8q --layouts NHWC --batch 64 --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|ERR'); sys.exit()
for r in d['results']: print('$2|$3|%s|%s|%.1f|%s' % (r['layer'], r.get('dtype'), r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
{
for t in 128x64x4 128x64x6 128x64x8 64x64x8 256x64x4; do forced "l1 3x3" $t ""; forced "l1 3x3" $t 0; done
for t in 192x128x3 192x128x4 128x128x3 128x128x4 128x64x6; do forced "l2 3x3 128->128 @28" $t ""; forced "l2 3x3 128->128 @28" $t 0; done
} > $OUT/forced.txt 2>&1
wait

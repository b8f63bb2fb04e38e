#!/usr/bin/env bash
# The split rule's two changed cases: the rule (this build) against the old plan forced
# (256 x 128, four stages, K in 4 splits), alternated three times; GPU time (graphs).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
lk=device-bin/layoutkit
one() { # label batch net filter [env...]
  local label=$1 b=$2 net=$3 f=$4; shift 4
  out=$(env "$@" $lk conv bench --device cuda --net $net --layouts NHWC --batch $b --filter "$f" --repeats 20 --json 2>/tmp/err.txt) || { echo "$label $b $f failed: $(tail -2 /tmp/err.txt)"; return; }
  echo "$out" | python3 -c "
import json,sys
d=json.load(sys.stdin)
for r in d['results']: print('$label', '$b', r['layer'], r['kernel'], '%.1f'%r['tflops'], '%.2f us'%(r['median_s']*1e6))"
}
for round in 1 2 3; do
  one rule 32 resnet50 "l4 1x1 2048->512 @7"
  one old 32 resnet50 "l4 1x1 2048->512 @7" LAYOUTKIT_CONV_TILE=256x128x4 LAYOUTKIT_CONV_SPLITK=4
  one rule 2 vgg16 "conv4_1"
  one old 2 vgg16 "conv4_1" LAYOUTKIT_CONV_TILE=256x128x4 LAYOUTKIT_CONV_SPLITK=4
done

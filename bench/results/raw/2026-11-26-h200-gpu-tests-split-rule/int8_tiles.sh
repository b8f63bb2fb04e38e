#!/bin/bash
# int8 (i32 output) on ResNet-50's l1/l2 3x3 layers at batch 64, NHWC: forced tiles and
# persistent blocks against the rule. One JSON line per run.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/gt && tar xJf device-bin/gt.tar.xz -C /tmp/gt
lk=/tmp/gt/layoutkit
run() { # filter tile persistent tma
  out=$(LAYOUTKIT_CONV_TILE=$2 LAYOUTKIT_CONV_PERSISTENT=$3 LAYOUTKIT_CONV_TMA=$4 timeout 60 $lk conv bench --device cuda --net resnet50 --layouts NHWC --types i8 --batch 64 --filter "$1" --repeats 10 --json 2>&1 | tr -d '\n')
  echo "{\"filter\":\"$1\",\"tile\":\"$2\",\"persistent\":\"$3\",\"tma\":\"$4\",\"out\":${out:-null}}"
}
for f in "l1 3x3" "l2 3x3 128" "l2 3x3/2"; do
  run "$f" "" "" ""
  run "$f" "" 1 ""
  for t in 128x64x4 256x64x4 192x64x4 128x128x4 192x128x4 256x128x4; do
    run "$f" $t "" ""
    run "$f" $t 1 ""
    run "$f" $t 1 1
  done
done

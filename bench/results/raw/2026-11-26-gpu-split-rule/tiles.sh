#!/usr/bin/env bash
# Forced Hopper tiles and K splits on the worst layers: one JSON line per run.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
lk=device-bin/layoutkit
run() { # batch filter tile split
  out=$(LAYOUTKIT_CONV_TILE=$3 LAYOUTKIT_CONV_SPLITK=$4 timeout 60 $lk conv bench --device cuda --net all --layouts NHWC --batch $1 --filter "$2" --repeats 10 --json 2>/dev/null)
  echo "{\"batch\":$1,\"filter\":\"$2\",\"tile\":\"$3\",\"split\":\"$4\",\"out\":${out:-null}}"
}
for spec in "32|l4 1x1 2048->512 @7" "32|l3 1x1 512->256 @28" "32|mbv2 pw 1x1 576->96 @14" "32|mbv2 pw 1x1 960->160 @7" "64|mbv2 pw 1x1 960->160 @7" "64|l4 1x1 512->2048 @7"; do
  b=${spec%%|*}; f=${spec#*|}
  run $b "$f" "" ""
  for t in 64x64x4 128x64x4 64x128x4 128x128x4 192x128x4 256x128x4 128x256x3 256x64x4 192x64x4; do
    for s in 1 2 3 4; do run $b "$f" $t $s; done
  done
done

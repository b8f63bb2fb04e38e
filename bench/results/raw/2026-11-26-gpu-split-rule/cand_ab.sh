#!/usr/bin/env bash
# Our NHWC kernels only, every layer of three networks, two builds alternated per batch.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p $OUT/ab
for b in "$@"; do
  for lk in base cand; do
    start=$(date +%s)
    device-bin/lk-$lk conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > $OUT/ab/$lk-b$b-r$ROUND.json 2>$OUT/ab/$lk-b$b-r$ROUND.err
    echo "$lk batch $b: $(( $(date +%s) - start )) s"
  done
done

#!/bin/bash
cd /work/main
for round in 1 2 3; do
  for v in base new; do
    seg=64; [ $v = new ] && seg=128
    for f in "NCHW->NHWC" "NCHW->NCHW32c" "NCHW->kHWC8"; do
      tag=$(echo "$f" | tr -c 'A-Za-z0-9\n' '_')
      LK_SEG_FT=$seg target/release/layoutkit (temporary LK_SEG_FT override, not committed) bench --sweep --sweep-filter "$f" --threads 1 --repeats 5 --json > bench/results/raw/2026-11-27-zen5-sweep-segment/filtered/f-$v-$round-$tag.json 2>/dev/null
    done
    echo "done $v $round $(date +%T)"
  done
done

#!/bin/bash
cd /work/main
for round in 1 2; do
  for v in base new; do
    seg=64; [ $v = new ] && seg=128
    LK_SEG_FT=$seg target/release/layoutkit (with a temporary LK_SEG_FT override of the (far, close) segment in fast/shape.rs, not committed) bench --sweep --threads 1 --repeats 5 --json > bench/results/raw/2026-11-27-zen5-sweep-segment/seg-$v-$round-all.json 2>/tmp/segab/err-$v-$round.txt
    echo "done $v $round $(date +%T)"
  done
done

#!/bin/bash
# Stream-K diagnostic: the rule, stream-K, stream-K without the partial sums' reads and waits
# (write), and without any partial traffic (none; wrong outputs), alternated twice.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s $OUT && tar xJf device-bin/sk2.tar.xz -C /tmp/s
for rep in 1 2; do for v in rule sk write none; do
  E=1; F=""; [ $v = rule ] && E=""; [ $v = write ] && F=write; [ $v = none ] && F=none
  for b in 32 64; do
    LAYOUTKIT_CONV_STREAM_K=$E LAYOUTKIT_CONV_STREAM_K_FIXUP=$F /tmp/s/layoutkit conv bench --device cuda --net all --layouts NHWC --batch $b --filter "1x1 2048->512" --repeats 20 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
    LAYOUTKIT_CONV_STREAM_K=$E LAYOUTKIT_CONV_STREAM_K_FIXUP=$F /tmp/s/layoutkit conv bench --device cuda --net all --layouts NHWC --batch $b --filter "960->160" --repeats 20 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
  done
done; done | tee $OUT/sk_diag.txt | awk '{print $1, $2, $3, $4, $5, $6, $10, $13, $14, $15, $16, $17}'

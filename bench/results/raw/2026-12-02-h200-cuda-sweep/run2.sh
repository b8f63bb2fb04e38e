#!/usr/bin/env bash
# Second H200 call: the whole CUDA sweep, the two builds alternated again (second pass).
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
R=$OUT/r; mkdir -p $R
s=$(date +%s)
for b in base steps; do
  timeout 280 $B/lk-$b bench --sweep --device cuda --repeats 5 --json > $R/sweep-$b-2.json 2> $R/sweep-$b-2.err
  echo "pass 2 $b rc=$? $(( $(date +%s) - s )) s"
done
cd $OUT && tar czf run2.tgz r && rm -rf r

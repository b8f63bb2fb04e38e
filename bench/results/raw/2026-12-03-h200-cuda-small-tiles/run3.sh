#!/usr/bin/env bash
# The whole CUDA sweep on the final build (one pass).
B=device-bin/st
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
s=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu3.txt
timeout 480 $B/lk-final bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-final.json 2> $OUT/sweep-final.err
echo "sweep rc=$? $(( $(date +%s) - s )) s"
gzip -9 $OUT/sweep-final.json

#!/bin/bash
# The write order keeping the read vector: the CUDA reference test on this build, then the whole
# CUDA sweep after and before (device-bin/layoutkit), in that order.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/go && tar xJf device-bin/gt-order.tar.xz -C /tmp/go
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/tmp/go/cuda_vs_reference --nocapture --test-threads=4 > $OUT/cuda-vs-reference-2.log 2>&1; echo "tests rc=$?"; grep "test result\|checked" $OUT/cuda-vs-reference-2.log
/tmp/go/layoutkit bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-after2.json 2>/dev/null; echo "after rc=$?"
device-bin/layoutkit bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-before2.json 2>/dev/null; echo "before rc=$?"
cd $OUT && gzip -f *.json && ls

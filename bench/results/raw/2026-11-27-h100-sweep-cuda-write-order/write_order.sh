#!/bin/bash
# Tiles of compound source rows written in destination order: the CUDA reference test on this
# build, then the whole CUDA sweep before (device-bin/layoutkit) and after, and the MACE
# height-major rows again in the other order.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/go && tar xJf device-bin/gt-order.tar.xz -C /tmp/go
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/tmp/go/cuda_vs_reference --nocapture --test-threads=4 > $OUT/cuda-vs-reference.log 2>&1; echo "tests rc=$?"; grep "test result\|checked" $OUT/cuda-vs-reference.log
device-bin/layoutkit bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-before.json 2>/dev/null; echo "before rc=$?"
/tmp/go/layoutkit bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-after.json 2>/dev/null; echo "after rc=$?"
/tmp/go/layoutkit bench --sweep --device cuda --repeats 5 --sweep-filter "mace:in_out_height" --json > $OUT/ioh-after2.json 2>/dev/null
device-bin/layoutkit bench --sweep --device cuda --repeats 5 --sweep-filter "mace:in_out_height" --json > $OUT/ioh-before2.json 2>/dev/null
cd $OUT && gzip -f *.json && ls

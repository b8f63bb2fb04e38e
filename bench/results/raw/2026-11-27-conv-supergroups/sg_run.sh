#!/bin/bash
# Super-groups on the Hopper kernel: GPU tests, then ResNeXt-50's grouped layers with the
# grouped mma.sync kernel (SUPERGROUPS=0) and super-groups (default tile and forced tiles),
# batch 1/8/32/64 alternated twice; then cuDNN on the same layers (fair script).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/c $OUT && tar xJf device-bin/sg.tar.xz -C /tmp/c
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
( /tmp/c/cuda_conv_supergroups --nocapture > $OUT/test-sg.log 2>&1; echo "rc=$?" >> $OUT/test-sg.log ) &
( /tmp/c/cuda_conv grouped --nocapture > $OUT/test-grouped.log 2>&1; echo "rc=$?" >> $OUT/test-grouped.log ) &
wait
grep -E "test result|checked|panicked|rc=" $OUT/test-sg.log $OUT/test-grouped.log | head
grep -q "test result: ok" $OUT/test-sg.log || { grep -m3 -B2 -A8 "panicked" $OUT/test-sg.log; exit 1; }
L=""
for g in C=128,HW=56,O=128,K=3,G=32 C=256,HW=56,O=256,K=3,S=2,G=32 C=256,HW=28,O=256,K=3,G=32 C=512,HW=28,O=512,K=3,S=2,G=32 C=512,HW=14,O=512,K=3,G=32 C=1024,HW=14,O=1024,K=3,S=2,G=32 C=1024,HW=7,O=1024,K=3,G=32; do L="$L --layer $g"; done
for rep in 1 2; do for b in 1 8 32 64; do
  for v in off on 64x64x4 128x64x3 256x64x4 128x64x6 64x64x3x0 128x32x4; do
    case $v in off) E="LAYOUTKIT_CONV_SUPERGROUPS=0";; on) E="LAYOUTKIT_CONV_SUPERGROUPS=1";; *) E="LAYOUTKIT_CONV_SUPERGROUPS=1 LAYOUTKIT_CONV_TILE=$v";; esac
    env $E /tmp/c/layoutkit conv bench --device cuda $L --layouts NHWC --batch $b --repeats 10 2>>$OUT/bench.err | grep "@" | sed "s/^/$v b$b /"
  done
done; done > $OUT/sg.txt
python3 - $OUT/sg.txt <<'PY'
import sys
t = {}; vs = []
for line in open(sys.argv[1]):
    f = line.split(); i = f.index("NHWC")
    if f[0] not in vs: vs.append(f[0])
    t.setdefault((f[1], " ".join(f[2:i])), {}).setdefault(f[0], []).append(float(f[i + 4]))
print("batch layer TFLOP/s (best of 2): " + " ".join(vs))
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    print(k[0], k[1].ljust(34), " ".join(f"{max(t[k].get(v, [0])):7.1f}" for v in vs))
PY
head -3 $OUT/sg.txt
timeout 300 python3 bench/torch_conv_bench.py /tmp/c/layoutkit --batches 1,8,32,64 --repeats 10 $L --json $OUT/fair-grouped.json > $OUT/fair-grouped.md 2> $OUT/fair-grouped.err
grep -E "^batch|^worst|g32" $OUT/fair-grouped.md | cut -c1-200

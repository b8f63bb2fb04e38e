#!/bin/bash
# Super-groups of lcm(Cg, 64) channels: the GPU tests (super-groups, grouped, random problems),
# then RegNetX-600MF's grouped 3x3 layers (groups of 24) with the per-group kernel
# (SUPERGROUPS=0) and super-groups (=1), batch 1/8/32/64 alternated twice, and cuDNN on them.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/c $OUT && tar xJf device-bin/new.tar.xz -C /tmp/c
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat device-bin/BUILD; } > $OUT/gpu.txt; cat $OUT/gpu.txt
( /tmp/c/cuda_conv_supergroups --nocapture > $OUT/test-sg.log 2>&1; echo "rc=$?" >> $OUT/test-sg.log ) &


wait
grep -hE "test result|checked|rc=" $OUT/test-*.log
grep -q "test result: ok" $OUT/test-sg.log || { grep -m3 -B2 -A8 "panicked" $OUT/test-sg.log; exit 1; }
L=""; for g in C=48,HW=56,O=48,K=3,G=2 C=96,HW=28,O=96,K=3,G=4 C=240,HW=14,O=240,K=3,G=10 C=528,HW=7,O=528,K=3,G=22 C=96,HW=56,O=96,K=3,S=2,G=4; do L="$L --layer $g"; done
for rep in 1 2; do for b in 1 8 32 64; do for v in 0 1; do
  LAYOUTKIT_CONV_SUPERGROUPS=$v /tmp/c/layoutkit conv bench --device cuda $L --layouts NHWC --batch $b --repeats 10 2>>$OUT/bench.err | grep "@" | sed "s/^/s$v b$b /"
done; done; done > $OUT/regnet.txt
python3 - $OUT/regnet.txt <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    f = line.split(); i = f.index("NHWC")
    t.setdefault((f[1], " ".join(f[2:i])), {}).setdefault(f[0], []).append(float(f[i + 4]))
print("batch layer TFLOP/s per-group super-groups (best of 2)")
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    print(k[0], k[1].ljust(30), " ".join(f"{max(t[k].get(v, [0])):7.1f}" for v in ("s0", "s1")))
PY
timeout 200 python3 bench/torch_conv_bench.py /tmp/c/layoutkit --batches 1,8,32,64 --repeats 10 $L --json $OUT/fair-regnet.json > $OUT/fair-regnet.md 2> $OUT/fair-regnet.err
grep -E "^batch|g[0-9]" $OUT/fair-regnet.md | cut -c1-170

#!/bin/bash
# Grouped kernel: super-groups of S groups (LAYOUTKIT_CONV_GROUPED_S = 1, 2, 4, 8): the GPU test
# with each, then ResNeXt-50's grouped layers at batch 8 and 64, alternated twice.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/c $OUT && tar xJf device-bin/grp.tar.xz -C /tmp/c
for S in 1 2 4 8; do
  LAYOUTKIT_CONV_GROUPED_S=$S /tmp/c/cuda_conv grouped --nocapture > $OUT/test-grouped-s$S.log 2>&1; echo "S=$S rc=$?"; grep -E "test result|checked|panicked" $OUT/test-grouped-s$S.log | head -3
done
L=""
for g in C=128,HW=56,O=128,K=3,G=32 C=256,HW=56,O=256,K=3,S=2,G=32 C=256,HW=28,O=256,K=3,G=32 C=512,HW=28,O=512,K=3,S=2,G=32 C=512,HW=14,O=512,K=3,G=32 C=1024,HW=14,O=1024,K=3,S=2,G=32 C=1024,HW=7,O=1024,K=3,G=32; do L="$L --layer $g"; done
for rep in 1 2; do for b in 8 64; do for S in 1 2 4 8; do
  LAYOUTKIT_CONV_GROUPED_S=$S /tmp/c/layoutkit conv bench --device cuda $L --layouts NHWC --batch $b --repeats 10 2>/dev/null | grep "@" | sed "s/^/s$S b$b /"
done; done; done > $OUT/grp_s.txt
python3 - $OUT/grp_s.txt <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    f = line.split(); i = f.index("NHWC")
    t.setdefault((f[1], " ".join(f[2:i])), {}).setdefault(f[0], []).append(float(f[i + 4]))
print("batch layer TFLOP/s S=1 S=2 S=4 S=8 (best of 2)")
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    print(k[0], k[1].ljust(30), " ".join(f"{max(t[k].get(v, [0])):6.1f}" for v in ("s1", "s2", "s4", "s8")))
PY

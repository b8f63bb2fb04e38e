#!/bin/bash
# Depthwise NHWC channels per thread (LAYOUTKIT_CONV_DW_CHANNELS=2, 4, 8; 8 is the rule where
# C divides) on MobileNetV2's depthwise layers, alternated twice; the GPU tests of the
# depthwise kernel and of space to depth.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s2d $OUT/tests && tar xJf device-bin/s2d.tar.xz -C /tmp/s2d
L=/tmp/s2d/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for rep in 1 2; do for b in 1 8 32 64; do for v in 2 4 8; do
  LAYOUTKIT_CONV_DW_CHANNELS=$v $L conv bench --device cuda --net mobilenetv2 --layouts NHWC --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/cv=$v b$b /"
done; done; done > $OUT/dw_ab.txt
python3 - $OUT/dw_ab.txt <<'PY'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    cv, b = f[0], f[1]
    name = " ".join(f[2:f.index("NHWC")])
    ms = float(f[f.index("NHWC") + 3])
    t[(b, name, cv)].append(ms)
rows = sorted({(b, n) for b, n, _ in t}, key=lambda r: (int(r[0][1:]), r[1]))
print("batch layer ms(cv=2) ms(cv=4) ms(cv=8) x4 x8")
for b, n in rows:
    m = {cv: min(t[(b, n, cv)]) for cv in ("cv=2", "cv=4", "cv=8") if (b, n, cv) in t}
    base = m.get("cv=2")
    print(b, n.ljust(22), " ".join(f"{m.get(c, 0):.4f}" for c in ("cv=2", "cv=4", "cv=8")),
          " ".join(f"{base / m[c]:.2f}" if c in m else "-" for c in ("cv=4", "cv=8")))
PY
timeout 150 /tmp/s2d/cuda_conv depthwise --nocapture > $OUT/tests/cuda_conv_depthwise.log 2>&1; echo "rc=$?" >> $OUT/tests/cuda_conv_depthwise.log
grep -E "panicked|test result|checked|rc=" $OUT/tests/cuda_conv_depthwise.log
timeout 150 /tmp/s2d/cuda_conv_space_to_depth --nocapture > $OUT/tests/cuda_conv_space_to_depth.log 2>&1; echo "rc=$?" >> $OUT/tests/cuda_conv_space_to_depth.log
grep -E "panicked|test result|checked|rc=" $OUT/tests/cuda_conv_space_to_depth.log

#!/bin/bash
# Depthwise NHWC: channels per thread (2, 4) x output rows per thread (1, 2, 4) on
# MobileNetV2's depthwise layers (and NCHW rows 1, 2, 4); the GPU test of the depthwise
# kernel with 3 and 2 rows per thread.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s2d $OUT/tests && tar xJf device-bin/s2d.tar.xz -C /tmp/s2d
L=/tmp/s2d/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for b in 1 8 32 64; do for v in 2 4; do for r in 1 2 4; do
  LAYOUTKIT_CONV_DW_CHANNELS=$v LAYOUTKIT_CONV_DW_ROWS=$r $L conv bench --device cuda --net mobilenetv2 --layouts NHWC,NCHW --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/cv=$v,r=$r b$b /"
done; done; done > $OUT/dw_rows.txt
python3 - $OUT/dw_rows.txt <<'PY'
import sys, collections
t = {}
for line in open(sys.argv[1]):
    f = line.split()
    lay = "NHWC" if "NHWC" in f else "NCHW"
    i = f.index(lay)
    t[(f[1], lay, " ".join(f[2:i]), f[0])] = float(f[i + 3])
combos = ["cv=2,r=1", "cv=2,r=2", "cv=2,r=4", "cv=4,r=1", "cv=4,r=2", "cv=4,r=4"]
keys = sorted({k[:3] for k in t}, key=lambda k: (k[1], int(k[0][1:]), k[2]))
print("batch layout layer " + " ".join(combos))
for k in keys:
    base = t.get(k + ("cv=2,r=1",))
    print(k[0], k[1], k[2].ljust(22), " ".join(f"{base / t[k + (c,)]:.2f}" if k + (c,) in t else "-" for c in combos), f"{base:.4f}")
PY
for r in 3 2; do
  LAYOUTKIT_CONV_DW_ROWS=$r timeout 120 /tmp/s2d/cuda_conv depthwise --nocapture > $OUT/tests/dw-rows$r.log 2>&1; echo "rc=$?" >> $OUT/tests/dw-rows$r.log
  grep -E "panicked|test result|checked|rc=" $OUT/tests/dw-rows$r.log
done

#!/bin/bash
# Depthwise: the build before (f789362: one row per thread, rows in a loop) against this one
# (2 or 4 rows per thread at stride 1 by the rule; rows outside the image as predicated
# zero loads), alternated twice, MobileNetV2's depthwise layers, NHWC and NCHW, batch 1-64;
# then the GPU test of the depthwise kernel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/dw $OUT/tests && tar xJf device-bin/dw.tar.xz -C /tmp/dw
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for rep in 1 2; do for b in 1 8 32 64; do for v in old new; do
  L=/tmp/dw/layoutkit; [ $v = old ] && L=/tmp/dw/layoutkit-old
  $L conv bench --device cuda --net mobilenetv2 --layouts NHWC,NCHW --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
done; done; done > $OUT/dw_ab.txt
python3 - $OUT/dw_ab.txt <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    f = line.split()
    lay = "NHWC" if "NHWC" in f else "NCHW"
    i = f.index(lay)
    t.setdefault((f[1], lay, " ".join(f[2:i]), f[0]), []).append(float(f[i + 3]))
keys = sorted({k[:3] for k in t}, key=lambda k: (k[1], int(k[0][1:]), k[2]))
print("batch layout layer old_ms new_ms x (runs)")
for k in keys:
    o, n = min(t[k + ("old",)]), min(t[k + ("new",)])
    print(k[0], k[1], k[2].ljust(22), f"{o:.4f} {n:.4f} {o / n:.2f}", t[k + ("old",)], t[k + ("new",)])
PY
timeout 120 /tmp/dw/cuda_conv depthwise --nocapture > $OUT/tests/cuda_conv_depthwise.log 2>&1; echo "rc=$?" >> $OUT/tests/cuda_conv_depthwise.log
grep -E "panicked|test result|checked|rc=" $OUT/tests/cuda_conv_depthwise.log

#!/bin/bash
# NCHW depthwise through shared memory: the depthwise GPU test with the planes kernel and with
# registers, then the A/B (LAYOUTKIT_CONV_DW_NCHW=registers / planes, alternated twice) on
# MobileNetV2's depthwise layers at batch 1-64, NHWC alongside for the ratio.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/b $OUT && tar xJf device-bin/planes.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for v in planes registers; do
  LAYOUTKIT_CONV_DW_NCHW=$v /tmp/b/cuda_conv depthwise --nocapture > $OUT/test-dw-$v.log 2>&1; echo "$v rc=$?"
  grep -E "test result|checked|panicked" $OUT/test-dw-$v.log | head -5
done
for rep in 1 2; do for b in 1 8 32 64; do for v in registers planes; do
  LAYOUTKIT_CONV_DW_NCHW=$v /tmp/b/layoutkit conv bench --device cuda --net mobilenetv2 --layouts NHWC,NCHW --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
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
print("batch layout layer registers_ms planes_ms x (runs) | planes/NHWC")
for k in keys:
    o, n = min(t[k + ("registers",)]), min(t[k + ("planes",)])
    nh = min(t.get((k[0], "NHWC", k[2], "planes"), [float("nan")]))
    print(k[0], k[1], k[2].ljust(22), f"{o:.4f} {n:.4f} {o / n:.2f}", t[k + ("registers",)], t[k + ("planes",)], f"| {nh / n:.2f}" if k[1] == "NCHW" else "")
PY

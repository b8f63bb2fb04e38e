#!/bin/bash
# Depthwise, last build: the A/B against f789362 (alternated twice, NHWC and NCHW, batch
# 1-64), then the fair comparison with cuDNN on MobileNetV2's layers.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/dw $OUT && tar xJf device-bin/dw.tar.xz -C /tmp/dw
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
timeout 200 python3 bench/torch_conv_bench.py /tmp/dw/layoutkit --batches 1,8,32,64 --repeats 10 --net mobilenetv2 --json $OUT/fair-mbv2.json > $OUT/fair-mbv2.md 2> $OUT/fair.err
grep -E "^batch|^worst" $OUT/fair-mbv2.md

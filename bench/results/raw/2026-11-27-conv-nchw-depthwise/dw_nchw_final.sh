#!/bin/bash
# NCHW depthwise, the rule's runs (rows of 14 one per thread, two rows, packed stores) against
# the build before (layoutkit-old with LAYOUTKIT_CONV_DW_NCHW=registers: the same NCHW kernel
# as main before), alternated twice, NHWC and NCHW, MobileNetV2's depthwise layers, batch
# 1-64; first the depthwise GPU test with the rule.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/r $OUT && tar xJf device-bin/nchwdw.tar.xz -C /tmp/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
/tmp/r/cuda_conv depthwise --nocapture > $OUT/test-dw.log 2>&1; echo "rc=$?"
grep -E "test result|checked|panicked" $OUT/test-dw.log | head -3
for rep in 1 2; do for b in 1 8 32 64; do for v in old new; do
  L=/tmp/r/layoutkit; [ $v = old ] && L=/tmp/r/layoutkit-old
  LAYOUTKIT_CONV_DW_NCHW=registers $L conv bench --device cuda --net mobilenetv2 --layouts NHWC,NCHW --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
done; done; done > $OUT/dw_final_ab.txt
python3 - $OUT/dw_final_ab.txt <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    f = line.split()
    lay = "NHWC" if "NHWC" in f else "NCHW"
    i = f.index(lay)
    t.setdefault((f[1], lay, " ".join(f[2:i]), f[0]), []).append(float(f[i + 3]))
keys = sorted({k[:3] for k in t}, key=lambda k: (k[1], int(k[0][1:]), k[2]))
print("batch layout layer old_ms new_ms x (runs) | NCHW/NHWC old new")
for k in keys:
    o, n = min(t[k + ("old",)]), min(t[k + ("new",)])
    r = ""
    if k[1] == "NCHW":
        ho, hn = min(t[(k[0], "NHWC", k[2], "old")]), min(t[(k[0], "NHWC", k[2], "new")])
        r = f"| {ho / o:.2f} {hn / n:.2f}"
    print(k[0], k[1], k[2].ljust(22), f"{o:.4f} {n:.4f} {o / n:.2f}", t[k + ("old",)], t[k + ("new",)], r)
PY

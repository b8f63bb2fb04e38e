#!/bin/bash
# NCHW depthwise in registers: packed stores and 32-bit index division (new) against the build
# before (old, LAYOUTKIT_CONV_DW_NCHW=registers), and 1, 2 and 4 output rows per thread
# (LAYOUTKIT_CONV_DW_ROWS), alternated twice on MobileNetV2's depthwise layers at batch 1-64;
# first the depthwise GPU test with 1, 2 and 4 rows forced.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc LAYOUTKIT_CONV_DW_NCHW=registers
mkdir -p /tmp/r $OUT && tar xJf device-bin/rows.tar.xz -C /tmp/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for r in 1 2 4; do
  LAYOUTKIT_CONV_DW_ROWS=$r /tmp/r/cuda_conv depthwise --nocapture > $OUT/test-dw-rows$r.log 2>&1; echo "rows $r rc=$?"
  grep -E "test result|checked|panicked" $OUT/test-dw-rows$r.log | head -3
done
for rep in 1 2; do for b in 1 8 32 64; do for v in old r1 r2 r4; do
  L=/tmp/r/layoutkit; [ $v = old ] && L=/tmp/r/layoutkit-old
  R=${v#r}; [ $v = old ] && R=1
  LAYOUTKIT_CONV_DW_ROWS=$R $L conv bench --device cuda --net mobilenetv2 --layouts NCHW --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
done; done; done > $OUT/dw_rows_ab.txt
python3 - $OUT/dw_rows_ab.txt <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    f = line.split()
    i = f.index("NCHW")
    t.setdefault((f[1], " ".join(f[2:i])), {}).setdefault(f[0], []).append(float(f[i + 3]))
print("batch layer old_ms | new r1 r2 r4 ms | old/r1 old/r2 old/r4")
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    m = {v: min(x) for v, x in t[k].items()}
    print(k[0], k[1].ljust(22), f"{m['old']:.4f} | {m['r1']:.4f} {m['r2']:.4f} {m['r4']:.4f} | " + " ".join(f"{m['old'] / m[v]:.2f}" for v in ("r1", "r2", "r4")), t[k])
PY

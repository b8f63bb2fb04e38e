#!/bin/bash
# NCHW depthwise in registers: outputs per thread along W (LAYOUTKIT_CONV_DW_COLS) and rows
# per thread (LAYOUTKIT_CONV_DW_ROWS), alternated twice on MobileNetV2's depthwise layers at
# batch 1-64; first the depthwise GPU test with 7 x 7 and 14 x 2 runs forced.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/r $OUT && tar xJf device-bin/cols.tar.xz -C /tmp/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for cr in 7:7 14:2 3:1; do
  LAYOUTKIT_CONV_DW_COLS=${cr%:*} LAYOUTKIT_CONV_DW_ROWS=${cr#*:} /tmp/r/cuda_conv depthwise --nocapture > $OUT/test-dw-c${cr%:*}r${cr#*:}.log 2>&1; echo "$cr rc=$?"
  grep -E "test result|checked|panicked" $OUT/test-dw-c${cr%:*}r${cr#*:}.log | head -3
done
for rep in 1 2; do for b in 1 8 32 64; do for v in c4r1 c4r2 c7r1 c7r2 c7r4 c7r7 c14r1 c14r2; do
  C=${v#c}; C=${C%r*}; R=${v#*r}
  LAYOUTKIT_CONV_DW_COLS=$C LAYOUTKIT_CONV_DW_ROWS=$R /tmp/r/layoutkit conv bench --device cuda --net mobilenetv2 --layouts NCHW --batch $b --filter "dw" --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
done; done; done > $OUT/dw_cols_ab.txt
python3 - $OUT/dw_cols_ab.txt <<'PY'
import sys
t = {}
for line in open(sys.argv[1]):
    f = line.split()
    i = f.index("NCHW")
    t.setdefault((f[1], " ".join(f[2:i])), {}).setdefault(f[0], []).append(float(f[i + 3]))
vs = ["c4r1", "c4r2", "c7r1", "c7r2", "c7r4", "c7r7", "c14r1", "c14r2"]
print("batch layer ms: " + " ".join(vs) + " | best")
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    m = {v: min(x) for v, x in t[k].items()}
    print(k[0], k[1].ljust(22), " ".join(f"{m[v]:.4f}" for v in vs), "|", min(vs, key=lambda v: m[v]), "spread", " ".join(f"{max(t[k][v]) / min(t[k][v]):.2f}" for v in vs))
PY

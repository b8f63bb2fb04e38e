#!/bin/bash
# Stream-K: the GPU test, then every NHWC layer of the three networks at batch 1-64 with
# LAYOUTKIT_CONV_STREAM_K=1 (wherever the TMA tile takes it) against the rule (unset),
# alternated twice.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/s $OUT && tar xJf device-bin/sk.tar.xz -C /tmp/s
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 300 /tmp/s/cuda_conv_stream_k --nocapture --test-threads=2 > $OUT/test-stream-k.log 2>&1; echo "test rc=$?"
grep -E "test result|checked|panicked|match fresh|error" $OUT/test-stream-k.log | head -8
[ "$(grep -c 'test result: ok' $OUT/test-stream-k.log)" = 1 ] || exit 1
for rep in 1 2; do for b in 1 8 32 64; do for v in rule sk; do
  E=""; [ $v = sk ] && E=1
  LAYOUTKIT_CONV_STREAM_K=$E timeout 120 /tmp/s/layoutkit conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 2>/dev/null | grep "@" | sed "s/^/$v b$b /"
done; done; done > $OUT/sk_ab.txt
python3 - $OUT/sk_ab.txt <<'PY'
import sys
t, path = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    i = f.index("NHWC")
    k = (f[1], " ".join(f[2:i]))
    t.setdefault(k, {}).setdefault(f[0], []).append(float(f[i + 3]))
    path[k + (f[0],)] = " ".join(f[i + 6:])
print("batch layer rule_ms sk_ms rule/sk | rule path -> sk path")
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    if "rule" not in t[k] or "sk" not in t[k]:
        continue
    r, s = min(t[k]["rule"]), min(t[k]["sk"])
    if path[k + ("rule",)] == path[k + ("sk",)]:
        continue
    print(k[0], k[1].ljust(28), f"{r:.4f} {s:.4f} {r / s:.2f} | {path[k + ('rule',)]} -> {path[k + ('sk',)]}", t[k]["rule"], t[k]["sk"])
PY

#!/bin/bash
# Super-groups loaded by TMA against cp.async: the GPU test (both), then ResNeXt-50's grouped
# layers at batch 8/32/64 with the rule's tile (cp.async, TMA) and forced TMA tiles,
# alternated twice.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/c $OUT && tar xJf device-bin/sg.tar.xz -C /tmp/c
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt; cat $OUT/gpu.txt
/tmp/c/cuda_conv_supergroups --nocapture > $OUT/test-sg.log 2>&1; echo "rc=$?" >> $OUT/test-sg.log
grep -E "test result|checked|panicked|rc=" $OUT/test-sg.log | head
grep -c "wgmma-tma" $OUT/test-sg.log
grep -q "test result: ok" $OUT/test-sg.log || { grep -m3 -B2 -A8 "panicked" $OUT/test-sg.log; exit 1; }
L=""
for g in C=128,HW=56,O=128,K=3,G=32 C=256,HW=56,O=256,K=3,S=2,G=32 C=256,HW=28,O=256,K=3,G=32 C=512,HW=28,O=512,K=3,S=2,G=32 C=512,HW=14,O=512,K=3,G=32 C=1024,HW=14,O=1024,K=3,S=2,G=32 C=1024,HW=7,O=1024,K=3,G=32; do L="$L --layer $g"; done
for rep in 1 2; do for b in 8 32 64; do
  for v in cp tma t64x64x4 t128x64x6 t256x64x4 t192x64x4 t128x64x3; do
    case $v in cp) E="LAYOUTKIT_CONV_TMA=0";; tma) E="LAYOUTKIT_CONV_TMA=1";; *) E="LAYOUTKIT_CONV_TMA=1 LAYOUTKIT_CONV_TILE=${v#t}";; esac
    env $E /tmp/c/layoutkit conv bench --device cuda $L --layouts NHWC --batch $b --repeats 10 2>>$OUT/bench.err | grep "@" | sed "s/^/$v b$b /"
  done
done; done > $OUT/sg-tma.txt
python3 - $OUT/sg-tma.txt <<'PY'
import sys
t = {}; vs = []; names = {}
for line in open(sys.argv[1]):
    f = line.split(); i = f.index("NHWC")
    if f[0] not in vs: vs.append(f[0])
    t.setdefault((f[1], " ".join(f[2:i])), {}).setdefault(f[0], []).append(float(f[i + 4]))
    names[(f[0], f[1], " ".join(f[2:i]))] = " ".join(f[i + 6:])
print("batch layer TFLOP/s (best of 2): " + " ".join(vs))
for k in sorted(t, key=lambda k: (int(k[0][1:]), k[1])):
    print(k[0], k[1].ljust(34), " ".join(f"{max(t[k].get(v, [0])):7.1f}" for v in vs))
print(names.get(("tma", "b64", "custom 3x3 128->128 @56 g32")), "|", names.get(("cp", "b64", "custom 3x3 128->128 @56 g32")))
PY

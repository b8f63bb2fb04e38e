#!/bin/bash
# The 64 x 128 one-wave candidate: our NHWC kernels on every layer of three networks, the rule
# without it (LK_NO_ONE_WAVE=1) and with, alternated per batch. Summary of the layers whose
# kernel changed; the JSON in $OUT/one-wave.tar.gz.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
d=/tmp/ow; mkdir -p $d
for b in "$@"; do
  LK_NO_ONE_WAVE=1 device-bin/layoutkit conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > $d/base-b$b.json 2>/dev/null
  device-bin/layoutkit conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > $d/cand-b$b.json 2>/dev/null
done
tar czf $OUT/one-wave.tar.gz -C /tmp ow
python3 - "$@" <<'PY'
import json,sys,math
for b in sys.argv[1:]:
    A={x['layer']:x for x in json.load(open(f'/tmp/ow/base-b{b}.json'))['results'] if 'tflops' in x}
    B={x['layer']:x for x in json.load(open(f'/tmp/ow/cand-b{b}.json'))['results'] if 'tflops' in x}
    rs=[]
    for k in A:
        if A[k]['kernel']!=B[k]['kernel']:
            r=B[k]['tflops']/A[k]['tflops']; rs.append(r)
            print(f"b{b} {k:28} {A[k]['tflops']:7.1f} -> {B[k]['tflops']:7.1f} {r:.2f}x  {A[k]['kernel']} -> {B[k]['kernel']}")
    if rs: print(f"b{b} changed {len(rs)} geomean {math.exp(sum(map(math.log,rs))/len(rs)):.3f}")
PY

#!/bin/bash
# 96-column tiles where O is a multiple of 96 and not of 128: MobileNetV2's pointwise layers,
# NHWC f16, our kernels only, the rule without them (LK_NO96=1) and with, alternated.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p $OUT/ab96
for r in 1 2 3; do
  for b in 1 8 32 64; do
    LK_NO96=1 device-bin/layoutkit conv bench --device cuda --net mobilenetv2 --filter "pw" --layouts NHWC --batch $b --repeats 10 --json > $OUT/ab96/base-b$b-r$r.json 2>/dev/null
    device-bin/layoutkit conv bench --device cuda --net mobilenetv2 --filter "pw" --layouts NHWC --batch $b --repeats 10 --json > $OUT/ab96/cand-b$b-r$r.json 2>/dev/null
  done
done
python3 - <<'PY'
import json,glob,os,collections,statistics
o=os.environ['OUT']+'/ab96/'
d=collections.defaultdict(lambda: collections.defaultdict(list)); k={}
for f in glob.glob(o+'*.json'):
    w,b,_=os.path.basename(f).split('-')
    for x in json.load(open(f))['results']:
        if 'tflops' in x:
            d[(b,x['layer'])][w].append(x['tflops']); k[(b,x['layer'],w)]=x['kernel']
for key,v in sorted(d.items()):
    a=statistics.median(v['base']); c=statistics.median(v['cand'])
    if abs(c/a-1)>0.005 or k[key+('base',)]!=k[key+('cand',)]:
        print(key[0],key[1],'%.1f -> %.1f  %.2fx' % (a,c,c/a),k[key+('base',)],'->',k[key+('cand',)])
PY

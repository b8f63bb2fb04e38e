#!/bin/bash
# Stage rows of 64 and 32 bytes in the TMA kernel: the GPU test binary with the new tests,
# the build before (old, gt.tar.xz) and after (new) alternated twice on the 3x3 layers of 64
# channels (int8 there now runs the TMA kernel), the TMA kernel forced on f16 1x1 layers of
# 16-32 channels (64- and 32-byte rows) against the rule, and int8 over f16 on ResNet-50's
# 3x3 layers at batch 64. GPU time.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
mkdir -p /tmp/old /tmp/new && tar xJf device-bin/gt.tar.xz -C /tmp/old && tar xJf device-bin/new.tar.xz -C /tmp/new
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
( start=$(date +%s); /tmp/new/cuda_conv_persistent --nocapture --test-threads=4 > $OUT/persistent-tests.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/persistent-tests.log )
grep "test result\|rc=\|checked\|panicked" $OUT/persistent-tests.log
run() { # build batch filter types net [env]
  env $6 timeout 120 /tmp/$1/layoutkit conv bench --device cuda --net $5 --layouts NHWC --types $4 --batch $2 --filter "$3" --repeats 10 --json 2>/dev/null \
   | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1|$2|$3|ERR'); sys.exit()
for r in d['results']: print('$1|$6|$2|%s|%s|%.1f|%s' % (r['layer'], r.get('dtype'), r.get('tflops',0), r.get('kernel', r.get('skipped',''))[:60]))"
}
for pass in 1 2; do for build in old new; do
  for b in 8 64; do run $build $b "3x3 64->" f16,i8,i8q all; done
done; done
for b in 64 8; do for f in "pw 1x1 16->96 " "pw 1x1 24->144 " "pw 1x1 32->16 " "pw 1x1 32->192 "; do
  run new $b "$f" f16 mobilenetv2
  run new $b "$f" f16 mobilenetv2 LAYOUTKIT_CONV_TMA=1
  run new $b "$f" f16 mobilenetv2 "LAYOUTKIT_CONV_TMA=1 LAYOUTKIT_CONV_PERSISTENT=1"
done; done
/tmp/new/layoutkit conv bench --device cuda --filter 3x3 --types f16,i8,i8q --layouts NHWC,NC/32HW32 --batch 64 --repeats 10 --json > $OUT/int8-3x3-b64.json 2> $OUT/int8.err
python3 - $OUT/int8-3x3-b64.json <<'PY'
import json,sys,math
d=json.load(open(sys.argv[1]))
rows=[r for r in d['results'] if r['layout']=='NHWC']
by={}
for r in rows: by.setdefault(r['layer'],{})[r['dtype']]=r
g=[]
for l,v in by.items():
  if 'f16' in v and 'i8' in v:
    x=v['i8']['tflops']/v['f16']['tflops']; g.append(x)
    print('%-26s f16 %6.1f i8 %6.1f (%s) i8q %6.1f  i8/f16 %.2f' % (l, v['f16']['tflops'], v['i8']['tflops'], v['i8']['kernel'], v.get('i8q',{}).get('tflops',0), x))
print('geomean i8/f16 %.2f' % math.exp(sum(map(math.log,g))/len(g)))
PY

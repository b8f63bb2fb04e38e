#!/usr/bin/env bash
# Last H200 call: the 3x3 layers of ResNet-50, VGG-16 and MobileNetV2 (f16, i8, i8q; NHWC) at
# batch 64 with the build before (base) and this one (new, the rule), alternated twice, this
# one with the footprint kernel wherever it applies (fp1), l1's 256 x 64 tile in two warpgroups
# (forced) and four (the plan) alternated, batch 32 base / new; then the GPU
# tests of the footprint kernel, the int8 kernels and the NCHW loader (its footprint kernel
# shares the register-operand wgmma).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x ./* 2>/dev/null
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee $R/gpu.txt
s=$(date +%s)
B="conv bench --device cuda --net all --filter 3x3 --types f16,i8,i8q --layouts NHWC --repeats 10 --json"
for pass in 1 2; do
  timeout 120 ./layoutkit-base $B --batch 64 > $R/b64-base-$pass.json 2>/dev/null; echo "b64 base $pass rc=$? $(( $(date +%s) - s )) s"
  timeout 120 ./layoutkit-new $B --batch 64 > $R/b64-new-$pass.json 2>/dev/null; echo "b64 new $pass rc=$? $(( $(date +%s) - s )) s"
done
for pass in 1 2; do
  LAYOUTKIT_CONV_FOOTPRINT=1 LAYOUTKIT_CONV_TILE=256x64x4 timeout 60 ./layoutkit-new conv bench --device cuda --filter "l1 3x3" --types i8,i8q --layouts NHWC --repeats 10 --json --batch 64 > $R/b64-twowg-$pass.json 2>/dev/null; echo "b64 l1 two warpgroups $pass rc=$? $(( $(date +%s) - s )) s"
  timeout 60 ./layoutkit-new conv bench --device cuda --filter "l1 3x3" --types i8,i8q --layouts NHWC --repeats 10 --json --batch 64 > $R/b64-fourwg-$pass.json 2>/dev/null; echo "b64 l1 four warpgroups $pass rc=$? $(( $(date +%s) - s )) s"
done
LAYOUTKIT_CONV_FOOTPRINT=1 timeout 120 ./layoutkit-new $B --batch 64 > $R/b64-fp1-1.json 2>/dev/null; echo "b64 fp1 rc=$? $(( $(date +%s) - s )) s"
timeout 120 ./layoutkit-base $B --batch 32 > $R/b32-base-1.json 2>/dev/null; echo "b32 base rc=$? $(( $(date +%s) - s )) s"
timeout 120 ./layoutkit-new $B --batch 32 > $R/b32-new-1.json 2>/dev/null; echo "b32 new rc=$? $(( $(date +%s) - s )) s"
export LAYOUTKIT_REQUIRE_CUDA=1
for t in cuda_conv_footprint cuda_conv_int8 cuda_conv_nchw_loader; do
  ( t0=$(date +%s); timeout 170 ./$t --test-threads 4 > $R/$t.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - t0 ))" >> $R/$t.log ) &
done
wait
echo "tests $(( $(date +%s) - s )) s"
for t in cuda_conv_footprint cuda_conv_int8 cuda_conv_nchw_loader; do echo "== $t"; grep -E "^test |test result|rc=|checked|panicked" $R/$t.log | head -12; done
python3 - <<'PY' | tee $R/summary.txt
import json,os,glob
R=os.environ['OUT']+'/r'
rows={}
for f in sorted(glob.glob(R+'/b*.json')):
    tag=os.path.basename(f)[:-5]
    try: d=json.load(open(f))
    except Exception as e: print(tag,'ERR',e); continue
    for r in d['results']:
        rows.setdefault((tag[:3],r['layer'],r['dtype']),{})[tag[4:]]=(r.get('tflops',0),r.get('kernel',r.get('skipped',''))[:44])
for k,v in rows.items():
    print(k[0],k[1].ljust(26),k[2].ljust(4),' | '.join('%s %.1f %s'%(t,x[0],x[1]) for t,x in sorted(v.items())))
PY
cd $OUT && tar czf results.tgz r && rm -rf r

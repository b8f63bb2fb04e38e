#!/bin/bash
# run1 (H200): (0) the GPU tests of the cluster kernel (cuda_conv_cluster) and of the paths it
# touches (cuda_conv_small_gemm's 16-column TMA tiles, cuda_conv_persistent, cuda_conv's
# random problems in the kernels the rules pick and narrow Hopper tiles); (1) the build
# before (96d12da, device-bin/cl/layoutkit-base) and this build (layoutkit-new) on the rule,
# alternated twice; (2) this build with the tiles of configs.txt forced, each with and without
# clusters of two (LAYOUTKIT_CONV_CLUSTER=2), on the small-GEMM layers below 85% of cuDNN and
# ResNet-50's l4 3x3 512->512 @7, NHWC f16, batch 32 and 64, CUDA graphs (GPU time only);
# (3) the fair script (cuDNN's best layout in the same process, both sides GPU time only) on
# the layers whose plan the cluster rule changes (l4 1x1 2048->512 @7, l4 3x3 512->512 @7 and
# 3x3/2 @14 at batch 32 and 64, l4 1x1 1024->512 @14 and VGG-16 conv5_1 at batch 8; batch 8,
# 32 and 64 on each), the two builds alternated twice.
# A first pass compiles every kernel in parallel (timings thrown away).
set -u
D=device-bin/cl
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} LAYOUTKIT_CACHE_DIR=/tmp/kc
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; cat $D/BUILD; } | tee $R/gpu.txt
LAYERS="C=2048,HW=7,O=512,K=1 C=512,HW=7,O=2048,K=1 C=960,HW=7,O=320,K=1 C=512,HW=7,O=512,K=3"
LA=""; for l in $LAYERS; do LA="$LA --layer $l"; done
s=$(date +%s)
( sleep 560; cd $OUT && tar czf partial.tgz r ) &
WATCH=$!
one() { # binary name batch repeats [env...]
  local bin=$1 name=$2 b=$3 rep=$4; shift 4
  env "$@" timeout 30 $D/layoutkit-$bin conv bench --device cuda $LA --layouts NHWC --types f16 --batch $b --repeats $rep --json
}
export -f one; export D LA
P=""
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 150 $D/cuda_conv_cluster --test-threads 3 > $R/cuda_conv_cluster.log 2>&1; echo "rc=$?" >> $R/cuda_conv_cluster.log ) & P="$P $!"
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 150 $D/cuda_conv_small_gemm tma_tiles --test-threads 1 > $R/cuda_conv_small_gemm.log 2>&1; echo "rc=$?" >> $R/cuda_conv_small_gemm.log ) & P="$P $!"
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 150 $D/cuda_conv_persistent --test-threads 3 > $R/cuda_conv_persistent.log 2>&1; echo "rc=$?" >> $R/cuda_conv_persistent.log ) & P="$P $!"
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 150 $D/cuda_conv random_problems narrow_hopper --test-threads 2 > $R/cuda_conv.log 2>&1; echo "rc=$?" >> $R/cuda_conv.log ) & P="$P $!"
( { echo "rule"; echo "base"; cat $D/configs.txt; } | while read -r name envs; do for b in 32 64; do
    bin=new; [ "$name" = base ] && bin=base; echo "$bin $name $b${envs:+ $envs}"; done; done |
  xargs -P 10 -L 1 bash -c 'one "$0" "$1" "$2" 1 $3 $4 $5 $6 > /dev/null 2>&1' ) & P="$P $!"
wait $P
echo "tests and compile $(( $(date +%s) - s )) s"
for t in cuda_conv_cluster cuda_conv_small_gemm cuda_conv_persistent cuda_conv; do echo "== $t"; grep -E "^test |test result|rc=|panicked|checked" $R/$t.log | head -12; done
for pass in 1 2; do for b in 32 64; do for v in base new; do
  one $v rule-$v-$pass $b 10 > $R/b$b-rule-$v-$pass.json 2>/dev/null || echo "ab $b $v $pass rc=$?"
done; done; done
echo "ab $(( $(date +%s) - s )) s"
while read -r name envs; do for b in 32 64; do
  [ "$name" = rule ] && continue
  one new $name $b 10 $envs > $R/b$b-$name.json 2> $R/b$b-$name.err || echo "$name $b rc=$?"
done; done < $D/configs.txt
echo "timed $(( $(date +%s) - s )) s"
F="--repeats 10 --layer C=2048,HW=7,O=512,K=1 --layer C=512,HW=7,O=512,K=3 --layer C=512,HW=14,O=512,K=3,S=2 --layer C=1024,HW=14,O=512,K=1 --layer C=512,HW=14,O=512,K=3"
for pass in 1 2; do for v in base new; do
  timeout 100 python3 bench/torch_conv_bench.py $D/layoutkit-$v --batches 8,32,64 $F --json $R/fair-$v-$pass.json > $R/fair-$v-$pass.md 2>&1 || echo "fair $v $pass rc=$?"
done; done
for f in $R/fair-*.md; do echo "== $(basename $f)"; grep -E "2048->512|512->512|1024->512" $f | cut -c1-260; done | tee $R/fair.txt
echo "fair $(( $(date +%s) - s )) s"
python3 $D/summarize.py $R | tee $R/summary.txt
kill $WATCH 2>/dev/null; cd $OUT && tar czf results.tgz r && cp r/summary.txt r/fair.txt . && rm -rf r
echo "total $(( $(date +%s) - s )) s"

#!/bin/bash
# run2 (H200): the build before (device-bin/sg2/layoutkit-base, 1fe2193) against this build
# (layoutkit-new): (1) our NHWC f16 kernels on every layer of the three networks at batch 1, 8,
# 32 and 64, the two builds alternated twice (conv bench, CUDA graphs, GPU time); (2) the fair
# script (cuDNN's best layout timed in the same process, both sides GPU time only) on the
# small-GEMM layers below 85% and the layers whose plan changed, batch 32 and 64, the builds
# alternated twice; (3) the fair script on the three networks with this build at batch 32 and
# 64; (0, first, while the kernels compile) the GPU tests of the paths the rules now take;
# forced TMA tiles of 16-column multiples (this build) on six layers.
set -u
D=device-bin/sg2
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} LAYOUTKIT_CACHE_DIR=/tmp/kc
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader; cat $D/BUILD
  python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())"; } | tee $R/gpu.txt
s=$(date +%s)
B="conv bench --device cuda --net all --layouts NHWC --types f16 --json"
( sleep 575; cd $OUT && tar czf partial.tgz r ) &
WATCH=$!; P=""
# the GPU tests of the paths the rules take, while the benchmarks' kernels compile
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 $D/cuda_conv_small_gemm --test-threads 5 > $R/cuda_conv_small_gemm.log 2>&1; echo "rc=$?" >> $R/cuda_conv_small_gemm.log ) & P="$P $!"
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 $D/cuda_conv_persistent --test-threads 4 > $R/cuda_conv_persistent.log 2>&1; echo "rc=$?" >> $R/cuda_conv_persistent.log ) & P="$P $!"
( LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 $D/cuda_conv random_problems narrow_hopper --test-threads 2 > $R/cuda_conv.log 2>&1; echo "rc=$?" >> $R/cuda_conv.log ) & P="$P $!"
for v in base new; do for b in 1 8 32 64; do $D/layoutkit-$v $B --batch $b --repeats 1 > /dev/null 2>&1 & P="$P $!"; done; done; wait $P
echo "tests and compile $(( $(date +%s) - s )) s"
for pass in 1 2; do for b in 1 8 32 64; do for v in base new; do
  timeout 120 $D/layoutkit-$v $B --batch $b --repeats 10 > $R/ab-b$b-$v-$pass.json 2>/dev/null || echo "ab $b $v $pass rc=$?"
done; done; done
echo "ab $(( $(date +%s) - s )) s"
# TMA tiles of 16-column multiples (new in this build, forced only) on the layers whose tiles
# are few against the SMs: configs.txt (a name, then the environment), this build.
F=""; for l in C=2048,HW=7,O=512,K=1 C=512,HW=7,O=512,K=3 C=512,HW=14,O=512,K=3,S=2 C=960,HW=7,O=160,K=1 C=576,HW=7,O=160,K=1 C=512,HW=7,O=2048,K=1; do F="$F --layer $l"; done
one() { local b=$1 rep=$2; shift 2; env "$@" timeout 60 $PWD/$D/layoutkit-new conv bench --device cuda $F --layouts NHWC --types f16 --batch $b --repeats $rep --json; }
export -f one; export F D
while read -r name envs; do for b in 32 64; do echo "$b${envs:+ $envs}"; done; done < $D/configs.txt | xargs -P 12 -L 1 bash -c 'one "$0" 1 $1 $2 $3 > /dev/null 2>&1'
while read -r name envs; do for b in 32 64; do one $b 10 $envs > $R/forced-b$b-$name.json 2>/dev/null || echo "forced $name $b rc=$?"; done; done < $D/configs.txt
echo "forced $(( $(date +%s) - s )) s"
L=""; for l in C=512,HW=28,O=256,K=1 C=512,HW=14,O=512,K=3,S=2 C=2048,HW=7,O=512,K=1 C=512,HW=7,O=512,K=3 C=144,HW=56,O=24,K=1 C=576,HW=14,O=96,K=1 C=960,HW=7,O=160,K=1 C=256,HW=14,O=1024,K=1 C=512,HW=7,O=2048,K=1 C=64,HW=14,O=384,K=1 C=512,HW=28,O=128,K=1 C=512,HW=28,O=1024,K=1,S=2 C=384,HW=14,O=96,K=1; do L="$L --layer $l"; done
for pass in 1 2; do for v in base new; do
  timeout 200 python3 bench/torch_conv_bench.py $D/layoutkit-$v --batches 32,64 --repeats 10 $L --json $R/fair-layers-$v-$pass.json > $R/fair-layers-$v-$pass.md 2>&1 || echo "fair layers $v $pass rc=$?"
done; done
echo "fair layers $(( $(date +%s) - s )) s"
timeout 240 python3 bench/torch_conv_bench.py $D/layoutkit-new --batches 32,64 --repeats 10 --net all --json $R/fair-3nets.json > $R/fair-3nets.md 2>&1 || echo "fair 3nets rc=$?"
echo "fair 3nets $(( $(date +%s) - s )) s"
for t in cuda_conv_small_gemm cuda_conv_persistent cuda_conv; do echo "== $t"; grep -E "^test |test result|rc=|panicked" $R/$t.log | head -12; done
python3 $D/summary.py $R | tee $R/summary.txt
python3 $D/forced.py $R | tee $R/forced.txt
grep -E "^batch|^worst|^geo|layers at" $R/fair-3nets.md | cut -c1-300
kill $WATCH 2>/dev/null; cd $OUT && cp r/summary.txt r/forced.txt r/fair-3nets.md . && tar czf results.tgz r && rm -rf r

#!/bin/bash
# run1 (H200): the rule's tile and tiles, splits of K and persistent blocks forced
# (configs.txt: a name, then the environment) on the small-GEMM layers below 85% of cuDNN at
# batch 32 and 64 in the fair run of f12a5cd, build before (device-bin/layoutkit-base), NHWC
# f16, CUDA graphs (GPU time); then cuDNN's kernels on the same layers (cudnn_kernels.py).
# A first pass compiles every kernel in parallel (its timings are thrown away), the second
# times one configuration at a time.
set -u
D=device-bin/sg
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} LAYOUTKIT_CACHE_DIR=/tmp/kc
R=$OUT/r; mkdir -p $R
BIN=$PWD/device-bin/sg/layoutkit-base
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee $R/gpu.txt
LAYERS="C=512,HW=28,O=256,K=1 C=512,HW=14,O=512,K=3,S=2 C=2048,HW=7,O=512,K=1 C=512,HW=7,O=512,K=3 C=144,HW=56,O=24,K=1 C=576,HW=14,O=96,K=1 C=960,HW=7,O=160,K=1 C=256,HW=14,O=1024,K=1 C=512,HW=7,O=2048,K=1 C=64,HW=14,O=384,K=1"
LA=""; for l in $LAYERS; do LA="$LA --layer $l"; done
s=$(date +%s)
one() { # name batch repeats [env...]
  local name=$1 b=$2 rep=$3; shift 3
  env "$@" timeout 60 $BIN conv bench --device cuda $LA --layouts NHWC --types f16 --batch $b --repeats $rep --json
}
export -f one; export BIN LA
# compile pass: 12 at a time
while read -r name envs; do for b in 32 64; do echo "$name $b${envs:+ $envs}"; done; done < $D/configs.txt |
  xargs -P 12 -L 1 bash -c 'one "$0" "$1" 1 $2 $3 $4 > /dev/null 2>&1'
echo "compiled $(( $(date +%s) - s )) s"
while read -r name envs; do for b in 32 64; do
  one $name $b 10 $envs > $R/b$b-$name.json 2> $R/b$b-$name.err || echo "$name $b rc=$?"
done; done < $D/configs.txt
# the rule again at the end, to see the drift
for b in 32 64; do one rule2 $b 10 > $R/b$b-rule2.json 2>/dev/null; done
echo "timed $(( $(date +%s) - s )) s"
python3 $D/cudnn_kernels.py --batches 32,64 $(for l in $LAYERS; do echo --layer $l; done) --json $R/cudnn.json > $R/cudnn.txt 2>&1
echo "cudnn $(( $(date +%s) - s )) s"
python3 $D/summarize.py $R | tee $R/summary.txt
cat $R/cudnn.txt | cut -c1-200
cd $OUT && tar czf results.tgz r && cp r/summary.txt r/cudnn.txt . && rm -rf r

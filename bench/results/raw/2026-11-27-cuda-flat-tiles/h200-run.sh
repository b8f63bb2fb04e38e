#!/usr/bin/env bash
# GPU: tests of the narrowed flat rules, then sweeps: MODE=a (tests, new), MODE=b (base, new).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
if [ "$MODE" = a ]; then
  start=$(date +%s)
  LAYOUTKIT_REQUIRE_CUDA=1 ./cuda_vs_reference --test-threads 1 > $OUT/cuda_vs_reference.log 2>&1
  echo "tests rc=$? in $(( $(date +%s) - start )) s" >> $OUT/cuda_vs_reference.log
  tail -8 $OUT/cuda_vs_reference.log
  builds="new"
else
  builds="base new"
fi
for b in $builds; do
  s=$(date +%s)
  ./lk-$b bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-$b-$MODE.json 2> $OUT/sweep-$b-$MODE.err
  echo "sweep $b $MODE rc=$? $(( $(date +%s) - s )) s"
done
gzip -9 $OUT/*.json

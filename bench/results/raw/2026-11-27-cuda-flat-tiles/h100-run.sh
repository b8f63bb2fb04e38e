#!/usr/bin/env bash
# GPU: the tile kernels' flat reads and writes checked against the CPU reference, then the
# whole CUDA sweep with the build before (lk-base, bf78724) and after (lk-new), alternated
# twice.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
start=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 ./cuda_vs_reference --test-threads 1 > $OUT/cuda_vs_reference.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - start )) s" >> $OUT/cuda_vs_reference.log
tail -8 $OUT/cuda_vs_reference.log
for round in 1 2; do
  for b in base new; do
    [ $round = 2 ] && b=$([ $b = base ] && echo new || echo base)
    s=$(date +%s)
    ./lk-$b bench --sweep --device cuda --repeats 5 --json > $OUT/sweep-$b-$round.json 2> $OUT/sweep-$b-$round.err
    echo "sweep $b $round rc=$? $(( $(date +%s) - s )) s"
  done
done
gzip -9 $OUT/*.json
ls -la $OUT

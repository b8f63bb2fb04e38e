#!/usr/bin/env bash
# Gather chunks decoded once: the GPU reference test, then the build before (base) and this
# one (new) alternated over every sweep row whose kernels changed (two rounds, order
# reversed), then ncu on the worst row with each build.
B=device-bin/g
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
s=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 $B/cuda_vs_reference-new --test-threads 3 > $OUT/cuda_vs_reference-new.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s" | tee -a $OUT/cuda_vs_reference-new.log
for round in 1 2; do
  if [ $round = 1 ]; then order="base new"; else order="new base"; fi
  while read conv ty dims; do
    f=${conv%->*}; t=${conv#*->}; st=${ty%>*}; dt=${ty#*>}
    for v in $order; do
      [ $(date +%s) -gt $((s + 420)) ] && continue
      echo "$round $v $($B/lk-$v bench --device cuda --repeats 20 --json --from $f --to $t --dims $dims --dtype $st --to-dtype $dt 2>&1 | tr -d '\n ')"
    done
  done < $D/changed-rows.txt
done > $OUT/ab.txt
echo "ab $(( $(date +%s) - s )) s"
for v in base new; do
  timeout 40 ncu --clock-control none -k 'regex:^gather$' --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B/lk-$v bench --device cuda --repeats 6 --from OIHW --to OIHW16i16o --dims O=114131,I=3,H=7,W=7 --dtype f16 > $OUT/ncu-$v.txt 2>&1
done
echo "all $(( $(date +%s) - s )) s"

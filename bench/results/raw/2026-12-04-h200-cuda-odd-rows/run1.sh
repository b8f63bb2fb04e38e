#!/usr/bin/env bash
# Shared rows of an odd number of cells: the GPU reference test of the new build, then the
# build before (base: 9fe669b, tiles of whole source rows) and the new one (42dd91e)
# alternated over each row of changed-rows.txt timed alone (two rounds, order reversed, none
# started past 560 s). Run from the repository root; binaries in device-bin/or (git-ignored,
# carried).
B=device-bin/or
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
for f in $B/*.gz; do gunzip -c $f > /tmp/$(basename $f .gz); chmod +x /tmp/$(basename $f .gz); done
s=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
LAYOUTKIT_REQUIRE_CUDA=1 timeout 220 /tmp/cuda_vs_reference --test-threads 3 > $OUT/cuda_vs_reference-new.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s" | tee -a $OUT/cuda_vs_reference-new.log
for round in 1 2; do
  if [ $round = 1 ]; then order="base new"; else order="new base"; fi
  while read conv ty dims; do
    f=${conv%->*}; t=${conv#*->}; st=${ty%>*}; dt=${ty#*>}
    for v in $order; do
      [ $(date +%s) -gt $((s + 560)) ] && continue
      echo "$round $v $(/tmp/lk-$v bench --device cuda --repeats 20 --json --from $f --to $t --dims $dims --dtype $st --to-dtype $dt 2>&1 | tr -d '\n ')"
    done
  done < $D/changed-rows.txt
done > $OUT/ab.txt
echo "ab $(( $(date +%s) - s )) s"

#!/usr/bin/env bash
# Cells written out of order skewed apart in shared memory: the GPU reference test of the new
# build, then the new build with the skew off (base: LAYOUTKIT_CUDA_SKEW=0) and on (new)
# alternated over each row of changed-rows-ordered.txt (the rows of 32 MiB first) timed
# alone, two rounds in reversed orders, none started past 400 s. Run from the repository
# root; binaries in device-bin/sk (git-ignored, carried).
B=device-bin/sk
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
for f in $B/*.gz; do gunzip -c $f > /tmp/$(basename $f .gz); chmod +x /tmp/$(basename $f .gz); done
s=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 /tmp/cuda_vs_reference --test-threads 3 > $OUT/cuda_vs_reference-new.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s" | tee -a $OUT/cuda_vs_reference-new.log
for round in 1 2; do
  if [ $round = 1 ]; then order="base new"; else order="new base"; fi
  while read conv ty dims; do
    f=${conv%->*}; t=${conv#*->}; st=${ty%>*}; dt=${ty#*>}
    for v in $order; do
      [ $(date +%s) -gt $((s + 400)) ] && continue
      w=1; [ $v = base ] && w=0
      echo "$round $v $(LAYOUTKIT_CUDA_SKEW=$w /tmp/lk bench --device cuda --repeats 20 --json --from $f --to $t --dims $dims --dtype $st --to-dtype $dt 2>&1 | tr -d '\n ')"
    done
  done < $D/changed-rows-ordered.txt
done > $OUT/ab.txt
echo "ab $(( $(date +%s) - s )) s"

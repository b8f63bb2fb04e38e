#!/usr/bin/env bash
# Final build (4-byte flat stores by default): the GPU reference test, then base and final
# alternated over the changed rows of 8 MiB and more (two rounds, order reversed).
B=device-bin/st
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 $B/cuda_vs_reference-final --test-threads 3 > $OUT/cuda_vs_reference-final.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s" | tee -a $OUT/cuda_vs_reference-final.log
for round in 1 2; do
  if [ $round = 1 ]; then order="base final"; else order="final base"; fi
  while read conv ty dims; do
    case $dims in N=[1-9],*|N=[1-9][0-9],C=[1-9],*|N=1,*|N=2,*|N=3,*|N=6,*) continue;; esac
    f=${conv%->*}; t=${conv#*->}; st=${ty%>*}; dt=${ty#*>}
    for v in $order; do
      [ $(date +%s) -gt $((s + 500)) ] && continue
      echo "$round $v $($B/lk-$v bench --device cuda --repeats 20 --json --from $f --to $t --dims $dims --dtype $st --to-dtype $dt 2>&1 | tr -d '\n ')"
    done
  done < $D/changed-rows.txt
done > $OUT/ab2.txt
echo "all $(( $(date +%s) - s )) s"

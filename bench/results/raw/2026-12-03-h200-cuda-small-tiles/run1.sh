#!/usr/bin/env bash
# GPU reference test of the new build, then the rows whose kernels it changes
# (changed-rows.txt), timed one row at a time: base (48cf77a), new, new with 4-byte flat
# stores, new without steps for flat writes; two rounds, the order reversed in the second.
B=device-bin/st
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
chmod +x $B/*
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 200 $B/cuda_vs_reference-new --test-threads 3 > $OUT/cuda_vs_reference-new.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s" | tee -a $OUT/cuda_vs_reference-new.log
run() { # variant row...
  local v=$1; shift
  case $v in
    base) $B/lk-base "$@" ;;
    new) $B/lk-new "$@" ;;
    fw4) LAYOUTKIT_CUDA_FLAT_WRITE_BYTES=4 $B/lk-new "$@" ;;
    nosteps) LAYOUTKIT_CUDA_FLAT_STEPS=0 $B/lk-new "$@" ;;
  esac
}
for round in 1 2; do
  if [ $round = 1 ]; then order="base new fw4 nosteps"; else order="nosteps fw4 new base"; fi
  while read conv ty dims; do
    f=${conv%->*}; t=${conv#*->}; st=${ty%>*}; dt=${ty#*>}
    for v in $order; do
      [ $(date +%s) -gt $((s + 540)) ] && continue
      echo "$round $v $(run $v bench --device cuda --repeats 20 --json --from $f --to $t --dims $dims --dtype $st --to-dtype $dt 2>&1 | tr -d '\n ')"
    done
  done < $D/changed-rows.txt
done > $OUT/ab.txt
echo "all $(( $(date +%s) - s )) s"

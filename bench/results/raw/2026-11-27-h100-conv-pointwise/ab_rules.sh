#!/bin/bash
# Trial rules against the rule as it is: R1 (one-wave tile 64 x 96 where 96 columns need no
# more tiles than 128), R2 (two stages for one-step layers in the cp.async kernel), R3 (tall
# 256-row persistent TMA tile fitted to a narrow O for layers of 1-2 steps). Our NHWC kernels,
# every layer of three networks, variants alternated per batch; JSON in $OUT/ab-rules.tar.gz.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
lk=device-bin/layoutkit-trial
d=/tmp/abr; mkdir -p $d
python3 device-bin/check_rules.py $lk > $OUT/check-rules.txt 2>&1; echo "check rc=$?"; cat $OUT/check-rules.txt
for b in 64 32 8 1; do for rep in 1 2; do
  env $lk conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > $d/base-b$b-$rep.json 2>/dev/null
  env LK_R1=1 LK_R2=1 $lk conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > $d/r12-b$b-$rep.json 2>/dev/null
  env LK_R1=1 LK_R2=1 LK_R3=1 $lk conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > $d/r123-b$b-$rep.json 2>/dev/null
done; done
tar czf $OUT/ab-rules.tar.gz -C /tmp abr
python3 device-bin/ab_summary.py $d > $OUT/ab-summary.txt; cat $OUT/ab-summary.txt

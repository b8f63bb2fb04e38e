#!/bin/bash
# ab_env2.sh ROWS OUT ROUNDS BIN ENV_A ENV_B: one build, two environments (each "K=V K2=V2").
rows=$1; out=$2; rounds=$3; bin=$4; ea=$5; eb=$6
: > $out
while read f t d st dt; do
  for r in $(seq $rounds); do
    for side in A B; do
      if [ $side = A ]; then e=$ea; else e=$eb; fi
      res=$(env $e taskset -c 0 $bin bench --from $f --to $t --dims $d --dtype $st --to-dtype $dt --repeats 10 --json | tr -d "\n")
      echo "$side $f $t $d $st $dt $res" >> $out
    done
  done
done < $rows

#!/bin/bash
# ab_env.sh ROWS OUT VAR VALA VALB ROUNDS BIN: one build, an environment variable set two ways.
rows=$1; out=$2; var=$3; a=$4; b=$5; rounds=$6; bin=$7
: > $out
while read f t d st dt; do
  for r in $(seq $rounds); do
    for side in A B; do
      if [ $side = A ]; then v=$a; else v=$b; fi
      res=$(env $var=$v taskset -c 0 $bin bench --from $f --to $t --dims $d --dtype $st --to-dtype $dt --repeats 10 --json | tr -d "\n")
      echo "$side $f $t $d $st $dt $res" >> $out
    done
  done
done < $rows

#!/bin/bash
# Alternates two builds (or one build with an environment variable set two ways) over a list
# of rows (`FROM TO DIMS DTYPE TO_DTYPE` per line), ROUNDS times, one `layoutkit bench --json`
# per run on core 0; one line per run: side, row, JSON. an2.py summarises (median of rounds).
# usage: ab.sh ROWS OUT VAR VALA VALB ROUNDS BIN_A BIN_B
rows=$1; out=$2; var=$3; a=$4; b=$5; rounds=$6; ba=${7:-/tmp/seg/lk}; bb=${8:-$ba}
: > $out
while read f t d st dt; do
  for r in $(seq $rounds); do
    for side in A B; do
      if [ $side = A ]; then v=$a; bin=$ba; else v=$b; bin=$bb; fi
      res=$(env $var=$v taskset -c 0 $bin bench --from $f --to $t --dims $d --dtype $st --to-dtype $dt --repeats 10 --json | tr -d "\n")
      echo "$side $f $t $d $st $dt $res" >> $out
    done
  done
done < $rows

#!/bin/bash
# usage: ab3.sh "bins" batch threads rounds layouts kernels [filter]
BINS=$1; B=$2; T=$3; R=$4; L=$5; K=$6; F=${7:-dw}
for r in $(seq $R); do for v in $BINS; do
  /tmp/lk-$v conv bench --net mobilenetv2 --filter "$F" --batch $B --threads $T --layouts $L --kernels $K --repeats 10 2>/dev/null | grep "^mbv2" | awk -v v=$v '{print v, $3, $4, $5, $6, $8}'
done; done | awk '{k=$2" "$3" "$4" "$5; if(!((k,$1) in m) || $6<m[k,$1]) m[k,$1]=$6; keys[k]=1; bins[$1]=1} END {for (k in keys) {printf "%-22s", k; for (b in bins) printf " %s %.3f", b, m[k,b]; print ""}}' | sort

#!/usr/bin/env bash
# Base (the build before, BASE) and new (NEW) alternated three times over the sweep rows of
# OIHW into the filter layouts, one thread: `bench --sweep --sweep-filter "$F"`.
# Usage: ab.sh BASE NEW OUTDIR [F]
B=$1; N=$2; O=$3; F=${4:-OIHW}; mkdir -p $O
for r in 1 2 3; do
  if [ $r = 2 ]; then order="new base"; else order="base new"; fi
  for v in $order; do
    bin=$B; [ $v = new ] && bin=$N
    $bin bench --sweep --sweep-filter "$F" --threads 1 --repeats 5 --json > $O/oihw-$v-$r.json
  done
done

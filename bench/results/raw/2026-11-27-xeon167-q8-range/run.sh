#!/bin/bash
# The A/B of the AVX-512 quantising tie test (vrangeps tree): the build before (base) and after
# (new), the sweep's f32 -> i8 rows, one thread, alternated; rounds 1-2 base first, 3-4 new first.
for i in 1 2; do for b in base new; do lk-$b bench --sweep --sweep-filter "f32>i8" --threads 1 --repeats 5 --json > q8-$b-$i.json; done; done
for i in 3 4; do for b in new base; do lk-$b bench --sweep --sweep-filter "f32>i8" --threads 1 --repeats 5 --json > q8-$b-$i.json; done; done
python3 bench/sweep_ab_best.py "q8-*.json"

#!/usr/bin/env bash
# The sweep rows the record kernels and the 4 x 8 two-byte blocks touch (one-channel NCHW32c,
# kHWC8 and MACE in_out_channel rows, three-channel in_out_channel rows, width-major images of
# 7-pixel rows), the build before (bf78724, /tmp/lk-base) and after (e09cea6, /tmp/lk-head)
# alternated: AVX-512 builds twice (each build first once), the AVX2 stand-in once each; one
# thread. Files: KERNELS-BUILD-ROUND.json, then bench/sweep_ab_best.py "avx512-*.json".
set -e
grep -m1 "model name" /proc/cpuinfo > cpu.txt; grep -m1 flags /proc/cpuinfo >> cpu.txt
one() { # kernels build round
  local bin=/tmp/lk-$([ $2 = base ] && echo base || echo head) k=$([ $1 = avx2 ] && echo avx2)
  for f in "NCHW32c C=1," "kHWC8 C=1," "in_out_channel C=1," "in_out_channel C=3," "in_out_width W=7"; do
    LAYOUTKIT_CPU_KERNELS=$k $bin bench --sweep --sweep-filter "$f" --threads 1 --repeats 5 --json
  done | python3 -c 'import json,sys
docs=[json.loads(x) for x in sys.stdin.read().replace("}\n{","}\x00{").split("\x00")]
d=docs[0]; d["rows"]=[r for x in docs for r in x["rows"]]; json.dump(d,sys.stdout)' > $1-$2-$3.json
  echo "$(date +%T) $1 $2 $3 done"
}
one avx512 base 1; one avx512 new 1; one avx512 new 2; one avx512 base 2
one avx2 base 1; one avx2 new 1

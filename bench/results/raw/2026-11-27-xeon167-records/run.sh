#!/usr/bin/env bash
# The sweep rows the record kernels touch (MACE in_out_channel both ways, one-channel rows),
# the build before (bf78724, /tmp/lk-base) and after (f98ec0e, /tmp/lk-rec) alternated twice,
# AVX-512 builds and the AVX2 stand-in, one thread.
set -e
grep -m1 "model name" /proc/cpuinfo > cpu.txt; grep -m1 flags /proc/cpuinfo >> cpu.txt
for round in 1 2; do
  for kernels in avx512 avx2; do
    for build in base new; do
      [ $round = 2 ] && b=$([ $build = base ] && echo new || echo base) || b=$build
      bin=/tmp/lk-$([ $b = base ] && echo base || echo rec)
      k=$([ $kernels = avx2 ] && echo avx2 || echo "")
      for f in mace:in_out_channel "C=1,"; do
        name=$([ "$f" = "C=1," ] && echo c1 || echo mace)
        LAYOUTKIT_CPU_KERNELS=$k $bin bench --sweep --sweep-filter "$f" --threads 1 --repeats 5 --json \
          > $name$kernels-$b-$round.json
      done
    done
  done
done

#!/usr/bin/env bash
# The sweep's f32 -> i8 rows on the AVX2 builds (LAYOUTKIT_CPU_KERNELS=avx2 on the AVX-512 Xeon:
# a stand-in), one thread: the build before the per-block tie test (506435b, /tmp/lk-q0) and
# after (/tmp/lk-q), alternated four times (two rounds starting with each).
set -e
grep -m1 "model name" /proc/cpuinfo > cpu.txt; grep -m1 flags /proc/cpuinfo >> cpu.txt
one() { LAYOUTKIT_CPU_KERNELS=avx2 /tmp/lk-$([ $1 = base ] && echo q0 || echo q) bench --sweep \
  --sweep-filter "f32>i8" --threads 1 --repeats 5 --json > avx2-$1-$2.json; echo "$(date +%T) $1 $2"; }
one base 1; one new 1; one new 2; one base 2; one base 3; one new 3; one new 4; one base 4

#!/usr/bin/env bash
# Runs bench/torch_conv_cpu_bench.py --ours over ResNet-50 and VGG-16, batch 1 and 8, one and two
# threads, on the AVX-512 build and on the AVX2 build (with PyTorch limited to AVX2 too:
# ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, and MKL_ENABLE_INSTRUCTIONS=AVX2: without it
# PyTorch runs 1x1 convolutions through MKL sgemm on AVX-512 still), writing one raw JSON per configuration
# and the load average before each to bench/results/raw/.
# Usage: bench/conv_cpu_compare.sh PYTHON LAYOUTKIT MACHINE-TAG [isa...]   (isa: avx512 avx2)
set -euo pipefail
py="$1"; lk="$2"; tag="$3"; shift 3
isas=("${@:-avx512 avx2}")
day="$(date -u +%Y-%m-%d)"
out=bench/results/raw
for isa in ${isas[@]}; do
  for net in resnet50 vgg16; do
    for batch in 1 8; do
      for threads in 1 2; do
        repeats=7; [ "$batch" = 8 ] && repeats=3
        name="$out/$day-conv-cpu-$tag-$isa-$net-b$batch-t$threads.json"
        echo "== $isa $net batch $batch threads $threads ($(uptime | sed 's/.*load/load/'))"
        if [ "$isa" = avx2 ]; then
          ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 "$py" bench/torch_conv_cpu_bench.py "$lk" \
            --ours --kernels avx2 --layouts NCHW8c,NHWC --net "$net" --batch "$batch" \
            --threads "$threads" --repeats "$repeats" --rounds 2 --json-out "$name"
        else
          "$py" bench/torch_conv_cpu_bench.py "$lk" --ours --kernels avx512 --layouts NCHW16c,NHWC \
            --net "$net" --batch "$batch" --threads "$threads" --repeats "$repeats" --rounds 2 \
            --json-out "$name"
        fi
      done
    done
  done
done

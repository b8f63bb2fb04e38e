set -e
cd /work/main
d=bench/results/raw/2026-11-27-xeon167-mbv2
py=/work/venv-conv/bin/python
for b in 1 8; do for t in 1 2; do
  echo "== avx512 b$b t$t $(uptime | sed 's/.*load/load/')"
  $py bench/torch_conv_cpu_bench.py /tmp/lk-new --net mobilenetv2 --batch $b --threads $t --ours --layouts NHWC,NCHW16c,NCHW --json-out $d/after-mbv2-avx512-b$b-t$t.json > $d/after-mbv2-avx512-b$b-t$t.txt 2>&1
  tail -2 $d/after-mbv2-avx512-b$b-t$t.txt
done; done
for b in 1 8; do for t in 1 2; do
  echo "== avx2 b$b t$t $(uptime | sed 's/.*load/load/')"
  ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 $py bench/torch_conv_cpu_bench.py /tmp/lk-new --net mobilenetv2 --batch $b --threads $t --ours --kernels avx2 --layouts NCHW8c,NHWC,NCHW --json-out $d/after-mbv2-avx2-b$b-t$t.json > $d/after-mbv2-avx2-b$b-t$t.txt 2>&1
  tail -2 $d/after-mbv2-avx2-b$b-t$t.txt
done; done




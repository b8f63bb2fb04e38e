set -e
cd /work/main
d=bench/results/raw/2026-11-27-xeon167-mbv2
py=/work/venv-conv/bin/python
for b in 1 8; do for t in 1 2; do
  echo "== avx512 b$b t$t $(uptime | sed 's/.*load/load/')"
  $py bench/torch_conv_cpu_bench.py /tmp/lk-head --net mobilenetv2 --batch $b --threads $t --ours --layouts NHWC,NCHW16c,NCHW --json-out $d/mbv2-avx512-b$b-t$t.json > $d/mbv2-avx512-b$b-t$t.txt 2>&1
  tail -2 $d/mbv2-avx512-b$b-t$t.txt
done; done
for b in 1 8; do for t in 1 2; do
  echo "== avx2 b$b t$t $(uptime | sed 's/.*load/load/')"
  ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 $py bench/torch_conv_cpu_bench.py /tmp/lk-head --net mobilenetv2 --batch $b --threads $t --ours --kernels avx2 --layouts NCHW8c,NHWC --json-out $d/mbv2-avx2-b$b-t$t.json > $d/mbv2-avx2-b$b-t$t.txt 2>&1
  tail -2 $d/mbv2-avx2-b$b-t$t.txt
done; done
echo "== convnext dw b1 t1"
$py bench/torch_conv_cpu_bench.py /tmp/lk-head --layer C=96,HW=56,O=96,K=7,G=96 --layer C=192,HW=28,O=192,K=7,G=192 --layer C=384,HW=14,O=384,K=7,G=384 --layer C=768,HW=7,O=768,K=7,G=768 --batch 1 --threads 1 --ours --layouts NHWC,NCHW16c,NCHW --json-out $d/convnext-dw7-b1-t1.json > $d/convnext-dw7-b1-t1.txt 2>&1
tail -2 $d/convnext-dw7-b1-t1.txt

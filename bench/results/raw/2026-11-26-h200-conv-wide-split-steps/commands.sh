export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
mkdir -p /tmp/s; B=./device-bin/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/s/gpu.txt
python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())" >> /tmp/s/gpu.txt
run() { name=$1; shift; for b in 1 8; do
  env "$@" timeout 60 $B conv bench --device cuda --net all --layouts NHWC --batch $b --repeats 10 --json > /tmp/s/$name-b$b.json 2>/dev/null; echo "$name b$b rc=$? $SECONDS s" >> /tmp/s/rc.txt
done; }
run rule X=1
run ws12 LAYOUTKIT_CONV_WIDE_SPLIT_STEPS=12
run ws16 LAYOUTKIT_CONV_WIDE_SPLIT_STEPS=16
run s1 LAYOUTKIT_CONV_SPLITK=1
run t128x64x4 LAYOUTKIT_CONV_TILE=128x64x4
run t64x64x4 LAYOUTKIT_CONV_TILE=64x64x4
run rule2 X=2
LAYOUTKIT_CONV_WIDE_SPLIT_STEPS=12 timeout 150 python3 bench/torch_conv_bench.py $B --batches 1,8 --repeats 10 --net all --json /tmp/s/fair-ws12.json > /tmp/s/fair-ws12.md 2>/tmp/s/fair.err; echo "fair rc=$? $SECONDS s" >> /tmp/s/rc.txt
cat /tmp/s/rc.txt
tar czf $OUT/s.tgz -C /tmp/s .

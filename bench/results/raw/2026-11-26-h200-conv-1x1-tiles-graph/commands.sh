export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
mkdir -p /tmp/x; B=./device-bin/layoutkit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/x/gpu.txt
run() { name=$1; shift; for b in 64 32; do
  env "$@" timeout 100 $B conv bench --device cuda --net all --filter 1x1 --layouts NHWC --batch $b --repeats 10 --json > /tmp/x/$name-b$b.json 2>/dev/null; echo "$name b$b rc=$? $SECONDS s" >> /tmp/x/rc.txt
done; }
run rule X=1
run t128x128x3x0 LAYOUTKIT_CONV_TILE=128x128x3x0
run t128x128x4 LAYOUTKIT_CONV_TILE=128x128x4
run t128x128x4s1 LAYOUTKIT_CONV_TILE=128x128x4 LAYOUTKIT_CONV_SPLITK=1
run t256x128tma LAYOUTKIT_CONV_TILE=256x128x4 LAYOUTKIT_CONV_TMA=1
run tma1 LAYOUTKIT_CONV_TMA=1
run t128x64x3x0 LAYOUTKIT_CONV_TILE=128x64x3x0
cat /tmp/x/rc.txt
tar czf $OUT/x.tgz -C /tmp/x .

#!/usr/bin/env bash
# One H200 call, from the repository root: the Python package's CUDA tests and the probe of
# views starting mid-vector (raw/2026-12-03-h200-cuda-misaligned/probe.py) on a wheel of build
# c3f6e33, then the whole CUDA sweep, one pass. The wheel, pytest's wheels and the stripped
# `layoutkit` binary (gzipped) come in device-bin/d1204 (git-ignored, carried).
B=device-bin/d1204
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
python3 -m pip install --no-deps --target /tmp/pyl $B/*.whl $B/wheels/*.whl > $R/pip.log 2>&1
export PYTHONPATH=/tmp/pyl
s=$(date +%s)
timeout 200 python3 bench/results/raw/2026-12-03-h200-cuda-misaligned/probe.py > $R/probe-after.txt 2>&1
echo "probe rc=$? $(( $(date +%s) - s )) s" >> $R/times.txt
s=$(date +%s)
LAYOUTKIT_REQUIRE_CUDA=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py \
  tests/python/test_cuda_conv.py > $R/pytest-cuda.log 2>&1
echo "pytest rc=$? $(( $(date +%s) - s )) s" >> $R/times.txt
s=$(date +%s)
gunzip -c $B/lk.gz > /tmp/lk && chmod +x /tmp/lk
timeout 420 /tmp/lk bench --sweep --device cuda --repeats 5 --json > $R/sweep.json 2> $R/sweep.err
echo "sweep rc=$? $(( $(date +%s) - s )) s" >> $R/times.txt
gzip $R/sweep.json

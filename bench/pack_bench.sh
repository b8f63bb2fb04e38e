#!/usr/bin/env bash
# Times `layoutkit pack` on a 1 GiB f32 checkpoint against a plain copy of the same file, and
# measures the peak resident memory of each pack (/usr/bin/time -v).
#
#   bench/pack_bench.sh [WORKDIR] [REPEATS]
#
# The checkpoint (made here with numpy and safetensors; uses the test suite's virtual environment
# target/py-test-venv where it exists, else python3 with those packages):
# 96 conv filters [512, 512, 3, 3] (9 MiB each), 32 depthwise filters [1024, 1, 3, 3], two
# dense weights [4096, 4096] (64 MiB each, the largest tensors), biases; 1.0 GiB in all. Also
# split into 4 shards (a sharded checkpoint) and 1- and 2-shard subsets of it, to see how the
# time grows with the shards.
#
# Page cache warm: every input is read once before the timed runs; the copy and the packs run
# alternately, REPEATS times each, and the median is reported. Each timed run starts after a
# `sync` (untimed). WORKDIR on tmpfs (/dev/shm) takes the disk out entirely. Both sides are timed without
# waiting for the disk (`cp`, and `pack --no-sync`) and with it (`dd conv=fsync`, and `pack`).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/layoutkit-pack-bench}
repeats=${2:-5}
py=python3
[ -x target/py-test-venv/bin/python ] && py=target/py-test-venv/bin/python
mkdir -p "$work"
cargo build --release --quiet -p layoutkit-cli
exe=$PWD/target/release/layoutkit

if [ ! -f "$work/model.safetensors" ]; then
  "$py" - "$work" <<'EOF'
import json, os, sys
import numpy as np
from safetensors.numpy import save_file
work = sys.argv[1]
rng = np.random.default_rng(1)
t = {}
for k in range(96):
    t[f"convs.{k}.weight"] = rng.standard_normal((512, 512, 3, 3), dtype=np.float32)
    t[f"convs.{k}.bias"] = rng.standard_normal(512, dtype=np.float32)
for k in range(32):
    t[f"dws.{k}.dw.weight"] = rng.standard_normal((1024, 1, 3, 3), dtype=np.float32)
for k in range(2):
    t[f"fcs.{k}.weight"] = rng.standard_normal((4096, 4096), dtype=np.float32)
    t[f"fcs.{k}.bias"] = rng.standard_normal(4096, dtype=np.float32)
save_file(t, os.path.join(work, "model.safetensors"))
names = sorted(t, key=lambda n: (n.split(".")[0], int(n.split(".")[1]), n))
# 4 shards of about 256 MiB, and indexes over the first 1, 2 and 4 of them.
os.makedirs(os.path.join(work, "ckpt"), exist_ok=True)
total = sum(v.nbytes for v in t.values())
shards, cur, size = [], {}, 0
for n in names:
    cur[n] = t[n]; size += t[n].nbytes
    if size >= total / 4 and len(shards) < 3:
        shards.append(cur); cur, size = {}, 0
shards.append(cur)
wm = []
for i, s in enumerate(shards):
    f = f"model-{i + 1:05d}-of-00004.safetensors"
    save_file(s, os.path.join(work, "ckpt", f))
    wm.append({n: f for n in s})
for k in (1, 2, 4):
    m = {}
    for d in wm[:k]:
        m.update(d)
    with open(os.path.join(work, "ckpt", f"first{k}.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": m}, fh)
EOF
fi

model=$work/model.safetensors
rule=(--rule 'dws.*.dw.weight=depthwise')
bytes=$(stat -c %s "$model")
cat "$model" "$work"/ckpt/*.safetensors >/dev/null

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
timed() { # prints seconds of "$@"; dirty pages of earlier runs are written back first (untimed),
  # so no run pays for the previous one's writeback
  local t0 t1; sync; t0=$(now); "$@" >/dev/null; t1=$(now); echo "$t1 - $t0" | bc -l
}

declare -A runs
names=(copy copy_fsync avx512_f32 avx512_f32_sync mace_f16 mace_f16_sync)
for ((r = 0; r < repeats; r++)); do
  rm -f "$work"/out*
  runs[copy]+="$(timed cp --reflink=never "$model" "$work/out.copy") "
  rm -f "$work/out.copy"
  runs[copy_fsync]+="$(timed dd if="$model" of="$work/out.copy" bs=16M conv=fsync status=none) "
  rm -f "$work/out.copy"
  runs[avx512_f32]+="$(timed "$exe" pack "$model" -o "$work/out.a" --target onednn-avx512 --no-sync "${rule[@]}") "
  rm -f "$work/out.a"
  runs[avx512_f32_sync]+="$(timed "$exe" pack "$model" -o "$work/out.a" --target onednn-avx512 "${rule[@]}") "
  rm -f "$work/out.a"
  runs[mace_f16]+="$(timed "$exe" pack "$model" -o "$work/out.m" --target mace-gpu --dtype f16 --no-sync "${rule[@]}") "
  rm -f "$work/out.m"
  runs[mace_f16_sync]+="$(timed "$exe" pack "$model" -o "$work/out.m" --target mace-gpu --dtype f16 "${rule[@]}") "
  rm -f "$work/out.m"
done
echo "input $model: $bytes bytes; $repeats runs each, median seconds, MB/s of the input"
for n in "${names[@]}"; do
  m=$(echo "${runs[$n]}" | tr ' ' '\n' | grep . | median)
  printf "%-16s %8.3f s  %7.0f MB/s   runs: %s\n" "$n" "$m" "$(echo "$bytes / $m / 1000000" | bc -l)" "${runs[$n]}"
done

echo "peak resident memory (/usr/bin/time -v), largest tensor 67108864 bytes:"
for t in "onednn-avx512" "mace-gpu --dtype f16"; do
  # shellcheck disable=SC2086
  /usr/bin/time -v "$exe" pack "$model" -o "$work/out.rss" --target $t --no-sync "${rule[@]}" 2>"$work/time.txt" >/dev/null
  printf "%-22s max RSS %s kB\n" "$t" "$(grep 'Maximum resident' "$work/time.txt" | awk '{print $NF}')"
  rm -f "$work/out.rss"
done

echo "sharded checkpoint (shards of about 256 MiB), onednn-avx512 f32, --no-sync:"
for k in 1 2 4; do
  ts=""
  for ((r = 0; r < repeats; r++)); do
    rm -rf "$work/out.sh"
    ts+="$(timed "$exe" pack "$work/ckpt/first$k.safetensors.index.json" -o "$work/out.sh" --target onednn-avx512 --no-sync "${rule[@]}") "
  done
  m=$(echo "$ts" | tr ' ' '\n' | grep . | median)
  printf "%d shard(s)  %8.3f s  %.3f s per shard   runs: %s\n" "$k" "$m" "$(echo "$m / $k" | bc -l)" "$ts"
done
rm -rf "$work/out.sh"

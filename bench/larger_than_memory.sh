#!/usr/bin/env bash
# Converts a tensor whose output is larger than the machine's memory, under a memory cgroup
# limit, and reports time and memory: the converter writes into a map of the output's temporary
# file, so memory is bounded by the page cache the kernel lends, not by the tensor.
#
#   bench/larger_than_memory.sh DIR [LIMIT_MIB] [N]
#
# DIR gets x.npy (u8, N x 16 x 8192 x 8192 random bytes: N GiB; default N = 6) and y.npy (its
# NHWC f32 conversion: 4N GiB). Needs root for the cgroup (v1 or v2 memory controller); without
# one it runs unbounded and says so. LIMIT_MIB defaults to 2048;
# 0 runs unbounded. The input is evicted from the page cache before the run.
set -euo pipefail
dir=${1:?usage: bench/larger_than_memory.sh DIR [LIMIT_MIB] [N]}
limit_mib=${2:-2048}
n=${3:-6}
bin=$(cd "$(dirname "$0")/.." && pwd)/target/release/layoutkit
[ -x "$bin" ] || { echo "build first: cargo build --release -p layoutkit-cli" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
shape="$n, 16, 8192, 8192"
data_bytes=$((n * 16 * 8192 * 8192))
if [ ! -f x.npy ] || [ "$(stat -c %s x.npy)" -ne $((data_bytes + 128)) ]; then
  python3 - "$shape" <<'EOF'
import struct, sys
d = "{'descr': '|u1', 'fortran_order': False, 'shape': (%s), }" % sys.argv[1]
hl = len(d) + 1
pad = 64 - (10 + hl) % 64
open("x.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", hl + pad) + d.encode() + b" " * pad + b"\n")
EOF
  head -c "$data_bytes" /dev/urandom >> x.npy
fi
rm -f y.npy
sync
python3 -c "import os; fd = os.open('x.npy', os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) memory"
echo "input:  $(stat -c %s x.npy) bytes (u8 $shape); output: $((4 * data_bytes + 128)) bytes (f32 NHWC)"
grep -E '^(MemFree|MemAvailable):' /proc/meminfo

# A memory cgroup of LIMIT_MIB (v2, else v1).
cg=""
bytes=$((limit_mib * 1024 * 1024))
if [ "$limit_mib" -eq 0 ]; then
  echo "no memory limit (LIMIT_MIB = 0)"
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cg=/sys/fs/cgroup/layoutkit-bench
  mkdir -p "$cg"
  echo "$bytes" > "$cg/memory.max"
  echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
  peak_file=$cg/memory.peak
  echo "cgroup v2 memory.max = $limit_mib MiB"
elif [ -d /sys/fs/cgroup/memory ] && mkdir -p /sys/fs/cgroup/memory/layoutkit-bench 2>/dev/null; then
  cg=/sys/fs/cgroup/memory/layoutkit-bench
  echo "$bytes" > "$cg/memory.limit_in_bytes"
  echo 0 > "$cg/memory.max_usage_in_bytes"
  peak_file=$cg/memory.max_usage_in_bytes
  echo "cgroup v1 memory.limit_in_bytes = $limit_mib MiB"
else
  echo "no memory cgroup available: running unbounded"
fi

cmd=(convert x.npy y.npy --from NCHW --to NHWC --to-dtype f32)
echo "command: layoutkit ${cmd[*]}"
start=$(date +%s.%N)
if [ -n "$cg" ]; then
  sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$cg" "$bin" "${cmd[@]}" &
else
  "$bin" "${cmd[@]}" &
fi
pid=$!
hwm=0 anon=0 file=0
while kill -0 "$pid" 2>/dev/null; do
  if s=$(cat "/proc/$pid/status" 2>/dev/null); then
    h=$(awk '/^VmHWM/ {print $2}' <<<"$s"); a=$(awk '/^RssAnon/ {print $2}' <<<"$s")
    f=$(awk '/^RssFile/ {print $2}' <<<"$s")
    [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    [ -n "$a" ] && [ "$a" -gt "$anon" ] && anon=$a
    [ -n "$f" ] && [ "$f" -gt "$file" ] && file=$f
  fi
  sleep 0.2
done
status=0
wait "$pid" || status=$?
end=$(date +%s.%N)
echo "exit status: $status"
echo "wall: $(python3 -c "print(f'{$end - $start:.1f} s')")"
echo "peak RSS (VmHWM, sampled every 0.2 s): $((hwm / 1024)) MiB; peak RssAnon: $anon KiB; peak RssFile: $((file / 1024)) MiB"
[ -n "$cg" ] && echo "cgroup peak usage: $(($(cat "$peak_file") / 1048576)) MiB"
ls -l y.npy
python3 - "$n" <<'EOF'
import random, struct, sys
N, C, H, W = int(sys.argv[1]), 16, 8192, 8192
x, y = open("x.npy", "rb"), open("y.npy", "rb")
y_header = y.read(256).index(b"\n") + 1
random.seed(1)
for _ in range(2000):
    n, c, h, w = (random.randrange(k) for k in (N, C, H, W))
    x.seek(128 + ((n * C + c) * H + h) * W + w)
    y.seek(y_header + 4 * (((n * H + h) * W + w) * C + c))
    assert float(x.read(1)[0]) == struct.unpack("<f", y.read(4))[0], (n, c, h, w)
print("2000 random elements checked against the input")
EOF
[ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true

echo "the same conversion written to a stream (held in memory), unbounded:"
"$bin" "${cmd[0]}" x.npy - "${cmd[@]:3}" > /dev/null || true

#!/usr/bin/env python3
"""Measured memory traffic of convolutions on the GPU: cuDNN (through PyTorch) in NCHW and NHWC,
f16 and f32, and layoutkit's NHWC f16 tensor-core kernel, on the same layers.

For every configuration a fresh process runs the convolution under Nsight Compute
(`ncu --clock-control none --profile-from-start off`): cuDNN's algorithm is chosen first
(`cudnn.benchmark`, outside the profiled range), then one convolution is profiled, every kernel
it launches included (an NCHW convolution may run layout transposes around its main kernel).
Reported per kernel: duration, DRAM bytes read and written, and global load sectors per request
(4 is a fully coalesced warp-wide 4-byte load; larger means scattered). Our kernel is profiled in
`layoutkit conv --device cuda` on .npy operands.

Usage (on a GPU machine with ncu): bench/conv_traffic.py PATH/TO/layoutkit [--batch 64]
    [--out DIR]   writes traffic.md there, and the raw ncu output of every run under DIR/raw
"""
import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile

METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
]

# ResNet-50's 3x3 layers (stride 1): channels and spatial size.
LAYERS = [(64, 56), (128, 28), (256, 14), (512, 7)]

ONE = r"""
import sys, torch
c, hw, n, fmt, dt = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
dtype = torch.float16 if dt == "f16" else torch.float32
mf = torch.channels_last if fmt == "NHWC" else torch.contiguous_format
x = torch.randn(n, c, hw, hw, device="cuda", dtype=dtype).to(memory_format=mf)
conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False).cuda().to(dtype).to(memory_format=mf)
with torch.no_grad():
    for _ in range(3):
        conv(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    y = conv(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
"""


def ncu(cmd, raw_path):
    full = ["ncu", "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS)] + cmd
    out = subprocess.run(full, capture_output=True, text=True)
    with open(raw_path, "w") as f:
        f.write(out.stdout)
        f.write(out.stderr)
    lines = [l for l in out.stdout.splitlines() if l.startswith('"')]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"ncu failed ({out.returncode}): {out.stderr[-2000:]}")
    kernels = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"]})
        v = row["Metric Value"].replace(",", "")
        unit = row["Metric Unit"]
        val = float(v)
        # Normalise units: bytes and nanoseconds.
        scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6,
                 "GB": 1e9, "nsecond": 1, "usecond": 1e3, "msecond": 1e6, "ns": 1, "us": 1e3,
                 "ms": 1e6}.get(unit, 1)
        k[row["Metric Name"]] = val * scale
    return list(kernels.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layoutkit")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    import numpy as np
    rows = []
    tmp = tempfile.mkdtemp()
    one = os.path.join(tmp, "one.py")
    with open(one, "w") as f:
        f.write(ONE)
    for c, hw in LAYERS:
        n = a.batch
        flop = 2.0 * n * c * c * 9 * hw * hw
        configs = [(f"cuDNN {fmt} {dt}", [sys.executable, one, str(c), str(hw), str(n), fmt, dt])
                   for dt in ("f16", "f32") for fmt in ("NCHW", "NHWC")]
        rng = np.random.default_rng(0)
        xp, wp, yp = (os.path.join(tmp, f"{s}.npy") for s in ("x", "w", "y"))
        np.save(xp, rng.standard_normal((n, hw, hw, c)).astype(np.float16))
        np.save(wp, (rng.standard_normal((c, 3, 3, c)) * 0.05).astype(np.float16))
        configs.append(("layoutkit NHWC f16", [a.layoutkit, "conv", xp, wp, yp, "--input-format", "NHWC",
                                               "--filter-format", "OHWI", "--output-format", "NHWC",
                                               "--padding", "1", "--output-dtype", "f16",
                                               "--device", "cuda"]))
        for label, cmd in configs:
            prof = cmd
            extra = [] if label.startswith("layoutkit") else ["--profile-from-start", "off"]
            os.makedirs(os.path.join(a.out, "raw"), exist_ok=True)
            raw = os.path.join(a.out, "raw", f"ncu-c{c}-hw{hw}-{label.replace(' ', '_')}.csv")
            try:
                ks = ncu(extra + prof, raw)
            except RuntimeError as e:
                print(f"{label} c={c}: {e}", file=sys.stderr)
                continue
            if label.startswith("layoutkit"):
                ks = [k for k in ks if "conv" in k["name"]]
            t = sum(k.get("gpu__time_duration.sum", 0) for k in ks)
            rd = sum(k.get("dram__bytes_read.sum", 0) for k in ks)
            wr = sum(k.get("dram__bytes_write.sum", 0) for k in ks)
            for k in ks:
                req = k.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 0)
                sec = k.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 0)
                rows.append((f"{c}x{hw}x{hw}", label, k["name"][:60], k.get("gpu__time_duration.sum", 0) / 1e3,
                             k.get("dram__bytes_read.sum", 0) / 1e6, k.get("dram__bytes_write.sum", 0) / 1e6,
                             sec / req if req else float("nan")))
            rows.append((f"{c}x{hw}x{hw}", label, "**all kernels**", t / 1e3, rd / 1e6, wr / 1e6,
                         flop / (t * 1e-9) / 1e12 if t else 0.0))
            print(f"{label} c={c}: {len(ks)} kernels, {t / 1e3:.1f} us, {rd / 1e6:.1f} MB read, "
                  f"{wr / 1e6:.1f} MB written", file=sys.stderr)
    md = ["| layer (C, H x W) | implementation | kernel | us | DRAM read MB | DRAM write MB | "
          "load sectors/request (kernels); TFLOP/s (all kernels) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.2f} |")
    text = "\n".join(md) + "\n"
    with open(os.path.join(a.out, "traffic.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The Python package against PyTorch and numpy, timed in the same process (issue goals):

* CUDA, torch tensors of 256 MiB and more, f32 and f16: layoutkit.convert (call overhead
  included: the Python call, the output allocation, the launches) against `y.copy_(x)` and
  PyTorch's own conversion of the same tensor, CUDA events around many calls after warm-up,
  median of the per-round averages.
* CUDA, small tensor (1x64x56x56 f16): the whole Python call (host time, synchronised) against
  `x.contiguous(memory_format=torch.channels_last)`.
* CPU, numpy 64 MiB: GB/s (bytes read + written), and with --layoutkit PATH against `layoutkit
  bench` of the same conversion on the same machine (the two alternate, 3 rounds, medians); a
  4 KiB array's call against numpy's `np.ascontiguousarray(x.transpose(...))`.

Writes a JSON document to stdout (or --out FILE) with every raw number.
"""

import argparse
import json
import platform
import statistics
import time

import numpy as np

import layoutkit as lk


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def host_time(f, n, rounds=7):
    f()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t) / n)
    return statistics.median(out), out


def gpu_time(torch, f, n, rounds=7):
    f()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            f()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e-3 / n)
    return statistics.median(out), out


def torch_conversion(name, shape):
    """PyTorch's own conversion of a tensor of `shape` (views and one contiguous copy)."""
    n, c, h, w = shape
    return {
        "NCHW->NHWC": lambda x: x.permute(0, 2, 3, 1).contiguous(),
        "NHWC->NCHW": lambda x: x.permute(0, 3, 1, 2).contiguous(),
        "NCHW->NCHW32c": lambda x: x.view(n, c // 32, 32, h, w).permute(0, 1, 3, 4, 2).contiguous(),
        "NCHW->kHWC8": lambda x: x.view(n, c // 8, 8, h, w).permute(0, 3, 4, 1, 2).contiguous(),
        "OIHW->OIHW16i16o": lambda x: x.view(n // 16, 16, c // 16, 16, h, w).permute(0, 2, 4, 5, 3, 1).contiguous(),
    }[name]


def cuda_rows(torch):
    rows = []
    big = [  # (name, src, dst, f32 shape: 256 MiB; f16 doubles the first extent)
        ("NCHW->NHWC", "NCHW", "NHWC", (64, 256, 64, 64)),
        ("NHWC->NCHW", "NHWC", "NCHW", (64, 64, 64, 256)),
        ("NCHW->NCHW32c", "NCHW", "NCHW32c", (64, 256, 64, 64)),
        ("NCHW->kHWC8", "NCHW", "kHWC8", (64, 256, 64, 64)),
        ("OIHW->OIHW16i16o", "OIHW", "OIHW16i16o", (4096, 4096, 2, 2)),
    ]
    for dtype in (torch.float32, torch.float16):
        for name, src, dst, shape in big:
            if dtype == torch.float16:
                shape = (shape[0] * 2,) + shape[1:]
            theirs = torch_conversion(name, shape)
            x = torch.randn(shape, device="cuda").to(dtype)
            y = torch.empty_like(x)
            assert torch.equal(lk.convert(x, src, dst).flatten(), theirs(x).flatten())
            nbytes = 2 * x.numel() * x.element_size()
            ours, ours_raw = gpu_time(torch, lambda: lk.convert(x, src, dst), 10)
            copy, copy_raw = gpu_time(torch, lambda: y.copy_(x), 10)
            pt, pt_raw = gpu_time(torch, lambda: theirs(x), 10)
            rows.append({"conversion": name, "dtype": str(dtype), "shape": list(shape), "bytes": nbytes,
                         "layoutkit_s": ours, "copy_s": copy, "torch_s": pt,
                         "vs_copy": copy / ours, "vs_torch": pt / ours,
                         "raw": {"layoutkit": ours_raw, "copy": copy_raw, "torch": pt_raw}})
    return rows


def cuda_small(torch):
    x = torch.randn(1, 64, 56, 56, device="cuda").half()

    def ours():
        lk.convert(x, "NCHW", "NHWC")
        torch.cuda.synchronize()

    def theirs():
        x.contiguous(memory_format=torch.channels_last)
        torch.cuda.synchronize()

    a, a_raw = host_time(ours, 2000)
    b, b_raw = host_time(theirs, 2000)
    return {"tensor": "1x64x56x56 f16", "layoutkit_call_s": a, "torch_channels_last_s": b,
            "ratio": a / b, "raw": {"layoutkit": a_raw, "torch": b_raw}}


def cli_bench_gbps(exe, threads):
    """`layoutkit bench` of the 64 MiB row: the engine alone, same machine."""
    import subprocess
    out = subprocess.run([exe, "--json", "bench", "--from", "NCHW", "--to", "NHWC", "--dims",
                          "N=16,C=256,H=64,W=64", "--threads", str(threads), "--repeats", "10"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["gbps"]


def cpu_rows(exe=None):
    rows = []
    x = np.random.default_rng(0).standard_normal((16, 256, 64, 64)).astype(np.float32)  # 64 MiB
    for threads in (1, 2):
        py, cli, raws = [], [], []
        for _ in range(3):
            t, raw = host_time(lambda: lk.convert(x, "NCHW", "NHWC", threads=threads), 5)
            py.append(2 * x.nbytes / t / 1e9)
            raws.append(raw)
            if exe:
                cli.append(cli_bench_gbps(exe, threads))
        # The same call writing into a reused output (out=, 64-byte aligned as the package
        # allocates large outputs): no page faults of fresh memory, as `layoutkit bench`.
        y = lk.convert(x, "NCHW", "NHWC")
        t_out, raw_out = host_time(lambda: lk.convert(x, "NCHW", "NHWC", out=y, threads=threads), 5)
        t_np, _ = host_time(lambda: np.ascontiguousarray(x.transpose(0, 2, 3, 1)), 3)
        row = {"conversion": "NCHW->NHWC f32 64 MiB", "threads": threads, "gbps": statistics.median(py),
               "gbps_rounds": py, "raw_s": raws, "gbps_out_reused": 2 * x.nbytes / t_out / 1e9,
               "raw_out_s": raw_out, "numpy_gbps": 2 * x.nbytes / t_np / 1e9}
        if cli:
            row["layoutkit_bench_gbps"] = statistics.median(cli)
            row["layoutkit_bench_rounds"] = cli
            row["python_over_bench"] = row["gbps"] / row["layoutkit_bench_gbps"]
            row["python_out_over_bench"] = row["gbps_out_reused"] / row["layoutkit_bench_gbps"]
        rows.append(row)
    small = np.random.default_rng(0).standard_normal((4, 16, 4, 4)).astype(np.float32)  # 4 KiB
    # The two alternate, 15 rounds of 5000 calls each; the ratio is the median of the rounds'
    # ratios (a shared machine's speed drifts between rounds more than within one).
    ours = lambda: lk.convert(small, "NCHW", "NHWC")
    theirs = lambda: np.ascontiguousarray(small.transpose(0, 2, 3, 1))
    ours(), theirs()
    a_raw, b_raw = [], []
    for _ in range(15):
        a_raw.append(host_time(ours, 5000, rounds=1)[0])
        b_raw.append(host_time(theirs, 5000, rounds=1)[0])
    ratios = sorted(a / b for a, b in zip(a_raw, b_raw))
    rows.append({"conversion": "NCHW->NHWC f32 4 KiB", "layoutkit_call_s": statistics.median(a_raw),
                 "numpy_s": statistics.median(b_raw), "ratio": ratios[len(ratios) // 2],
                 "raw": {"layoutkit": a_raw, "numpy": b_raw}})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="write the JSON here too")
    p.add_argument("--skip-cuda", action="store_true")
    p.add_argument("--layoutkit", help="the layoutkit binary (release build) to compare the CPU row with")
    a = p.parse_args()
    doc = {"cpu": cpu_name(), "layoutkit": lk.__version__, "cpu_rows": cpu_rows(a.layoutkit)}
    if not a.skip_cuda:
        try:
            import torch
            if torch.cuda.is_available():
                doc["gpu"] = torch.cuda.get_device_name()
                doc["torch"] = torch.__version__
                doc["cuda_small"] = cuda_small(torch)
                doc["cuda_rows"] = cuda_rows(torch)
        except ImportError:
            pass
    text = json.dumps(doc, indent=1)
    print(text)
    if a.out:
        open(a.out, "w").write(text)


if __name__ == "__main__":
    main()

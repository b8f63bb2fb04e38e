#!/usr/bin/env python3
"""On a GPU machine: `layoutkit conv --device cuda` against `--engine reference` on the same .npy
operands (f16 activations and filters in NCHW / NHWC / OIHW / OHWI, outputs in NCHW, NHWC and
NCHW8c, bias and ReLU, stride and padding), relative error under 1e-2; and a clear error for a
problem the GPU kernel does not take.

Usage: tests/cuda_conv_cli_check.py PATH/TO/layoutkit
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def run(cmd, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise SystemExit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p


def main():
    exe = os.path.abspath(sys.argv[1])
    rng = np.random.default_rng(7)
    cases = [
        # n, c, h, w, o, k, stride, pad, x format, w format, y format
        (2, 64, 14, 14, 96, 3, 1, 1, "NHWC", "OIHW", "NHWC"),
        (1, 32, 17, 9, 40, 3, 2, 1, "NCHW", "OHWI", "NCHW"),
        (3, 128, 7, 7, 256, 1, 1, 0, "NHWC", "OHWI", "NCHW8c"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda f: os.path.join(tmp, f)
        for i, (n, c, h, w, o, k, st, pad, xf, wf, yf) in enumerate(cases):
            x = rng.standard_normal((n, c, h, w)).astype(np.float16)
            wt = rng.standard_normal((o, c, k, k)).astype(np.float16)
            np.save(p("x.npy"), x if xf == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
            np.save(p("w.npy"), wt if wf == "OIHW" else np.ascontiguousarray(wt.transpose(0, 2, 3, 1)))
            np.save(p("b.npy"), rng.standard_normal(o).astype(np.float32))
            base = [exe, "conv", p("x.npy"), p("w.npy"), "--input-format", xf, "--filter-format", wf,
                    "--output-format", yf, "--stride", str(st), "--padding", str(pad),
                    "--bias", p("b.npy"), "--relu", "--output-dtype", "f32"]
            run(base[:2] + [p("x.npy"), p("w.npy"), p("gpu.npy")] + base[4:] + ["--device", "cuda"])
            run(base[:2] + [p("x.npy"), p("w.npy"), p("ref.npy")] + base[4:] + ["--engine", "reference"])
            g, r = np.load(p("gpu.npy")).astype(np.float64), np.load(p("ref.npy")).astype(np.float64)
            rel = np.linalg.norm(g - r) / np.linalg.norm(r)
            if g.shape != r.shape or rel > 1e-2:
                raise SystemExit(f"case {i}: shapes {g.shape} {r.shape}, relative error {rel:.2e}")
            print(f"case {i} ({xf} x {wf} -> {yf}): relative error {rel:.2e}")
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float16)
        np.save(p("x3.npy"), x)
        np.save(p("w3.npy"), rng.standard_normal((8, 3, 3, 3)).astype(np.float16))
        e = run([exe, "conv", p("x3.npy"), p("w3.npy"), p("bad.npy"), "--device", "cuda"], ok=False)
        if e.returncode != 2 or "multiple of 32" not in e.stderr or os.path.exists(p("bad.npy")):
            raise SystemExit(f"C = 3 on cuda: expected a clear error, got {e.returncode}: {e.stderr}")
        print("C = 3 on cuda:", e.stderr.strip())
    print("cuda conv CLI check passed")


if __name__ == "__main__":
    main()

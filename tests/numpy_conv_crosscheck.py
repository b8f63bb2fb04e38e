#!/usr/bin/env python3
"""Cross-checks `layoutkit conv` (the reference convolution) against a numpy convolution written
here independently (zero-pad, strided/dilated slices, einsum per filter tap, in float64).

Random problems cover stride, padding, dilation, groups (depthwise included), odd channel counts,
bias and ReLU, activations and outputs in NCHW / NHWC, filters in OIHW, and i8 operands (whose
i32 output must be exact). Float outputs must equal numpy's float64 result rounded once to the
output type (the reference engine); the fast engine (f32 implicit GEMM) and the blocked engine must be within 1e-5 of
numpy in relative norm.

Usage: numpy_conv_crosscheck.py PATH/TO/layoutkit
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def numpy_conv(x, w, stride, pad, dil, groups, bias, relu):
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for r in range(kh):
            for s in range(kw):
                rows = slice(r * dil[0], r * dil[0] + stride[0] * (oh - 1) + 1, stride[0])
                cols = slice(s * dil[1], s * dil[1] + stride[1] * (ow - 1) + 1, stride[1])
                patch = xp[:, g * i:(g + 1) * i, rows, cols]
                y[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, r, s])
    if bias is not None:
        y += bias[None, :, None, None]
    if relu:
        y = np.maximum(y, 0)
    return y


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")


def main():
    exe = os.path.abspath(sys.argv[1])
    rng = np.random.default_rng(20261122)
    checked = 0
    checked_fast = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda f: os.path.join(tmp, f)
        for case in range(24):
            groups = [1, 1, 2, 3][case % 4]
            cg = int(rng.integers(1, 5))
            depthwise = case % 6 == 5
            if depthwise:
                groups, cg = int(rng.integers(2, 9)), 1
            c = groups * cg
            o = groups * (1 if depthwise else int(rng.integers(1, 4)))
            kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
            stride = [int(v) for v in rng.integers(1, 3, size=2)]
            pad = [int(v) for v in rng.integers(0, 3, size=2)]
            dil = [int(v) for v in rng.integers(1, 3, size=2)]
            h = int(rng.integers(dil[0] * (kh - 1) + 1, 12))
            wd = int(rng.integers(dil[1] * (kw - 1) + 1, 12))
            n = int(rng.integers(1, 3))
            integer = case % 4 == 3
            if integer:
                x = rng.integers(-128, 128, size=(n, c, h, wd), dtype=np.int8)
                w = rng.integers(-128, 128, size=(o, cg, kh, kw), dtype=np.int8)
                bias, relu = None, False
            else:
                x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
                w = rng.standard_normal((o, cg, kh, kw)).astype(np.float32)
                bias = rng.standard_normal(o).astype(np.float32) if case % 2 else None
                relu = case % 3 == 0
            x_format = ["NCHW", "NHWC"][case % 2]
            y_format = ["NHWC", "NCHW"][case % 3 % 2]
            np.save(path("x.npy"), x if x_format == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
            np.save(path("w.npy"), w)
            cmd = [exe, "conv", path("x.npy"), path("w.npy"), path("y.npy"),
                   "--input-format", x_format, "--output-format", y_format,
                   "--stride", f"{stride[0]},{stride[1]}", "--padding", f"{pad[0]},{pad[1]}",
                   "--dilation", f"{dil[0]},{dil[1]}", "--groups", str(groups)]
            if bias is not None:
                np.save(path("b.npy"), bias)
                cmd += ["--bias", path("b.npy")]
            if relu:
                cmd += ["--relu"]
            run(cmd + ["--engine", "reference"])
            want = numpy_conv(x.astype(np.float64), w.astype(np.float64), stride, pad, dil, groups,
                              None if bias is None else bias.astype(np.float64), relu)
            want = want.astype(np.int32) if integer else want.astype(np.float32)
            got = np.load(path("y.npy"))
            if y_format == "NHWC":
                got = got.transpose(0, 3, 1, 2)
            if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
                raise SystemExit(f"case {case}: layoutkit conv differs from numpy "
                                 f"({got.dtype} {got.shape} vs {want.dtype} {want.shape})\n{' '.join(cmd)}")
            if not integer:
                for engine in ("fast", "blocked"):
                    run(cmd + ["--engine", engine, "--threads", "2"])
                    fast = np.load(path("y.npy")).astype(np.float64)
                    if y_format == "NHWC":
                        fast = fast.transpose(0, 3, 1, 2)
                    ref64 = want.astype(np.float64)
                    rel = np.linalg.norm(fast - ref64) / max(np.linalg.norm(ref64), 1e-30)
                    if rel > 1e-5:
                        raise SystemExit(f"case {case}: the {engine} engine is {rel:.2e} from numpy\n{' '.join(cmd)}")
                checked_fast += 1
            checked += 1
    print(f"numpy conv cross-check: {checked} convolutions (stride, padding, dilation, groups, "
          "depthwise, bias, ReLU, i8 -> i32) equal to numpy's float64 result rounded once; "
          f"{checked_fast} with the fast and the blocked engines within 1e-5")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cross-checks `layoutkit convert` against numpy, independently of layoutkit's own code.

For every name of layout-notation.md section 2 (canonical, cuDNN, TensorRT, oneDNN, PyTorch), for
f32, f16, i8 and u8 and for extents that are not multiples of the blocks, it converts a
numpy-saved NCHW / OIHW / NCDHW / ... array with layoutkit and checks that the output file is, byte
for byte, the file numpy writes for pad + reshape + transpose. Then it converts back with --dims
and checks that the input comes back exactly. The expected canonical form of every name is
written out below by hand, so the name tables are checked too.

Usage: numpy_crosscheck.py PATH/TO/layoutkit
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

# (name, canonical form, source layout of the input array)
CASES = [
    # canonical
    ("NCHW", "NCHW", "NCHW"), ("NHWC", "NHWC", "NCHW"), ("NCHW4c", "NCHW4c", "NCHW"),
    ("NCHW32c", "NCHW32c", "NCHW"), ("NHWC8c", "NHWC8c", "NCHW"), ("OIHW", "OIHW", "OIHW"),
    ("HWOI", "HWOI", "OIHW"), ("HWIO", "HWIO", "OIHW"), ("MIHW", "MIHW", "MIHW"),
    ("HWIM", "HWIM", "MIHW"), ("OIHW16i16o", "OIHW16i16o", "OIHW"),
    ("OIHW4i16o4i", "OIHW4i16o4i", "OIHW"), ("NCDHW", "NCDHW", "NCDHW"),
    ("NDHWC", "NDHWC", "NCDHW"), ("W", "W", "W"),
    # cuDNN
    ("NC/32HW32", "NCHW32c", "NCHW"), ("NC/4HW4", "NCHW4c", "NCHW"), ("NC/8HW8", "NCHW8c", "NCHW"),
    ("NC/1HW1", "NCHW", "NCHW"), ("NCHW_VECT_C:int8x4", "NCHW4c", "NCHW"),
    ("NCHW_VECT_C:int8x32", "NCHW32c", "NCHW"),
    # TensorRT
    ("kLINEAR", "NCHW", "NCHW"), ("kCHW2", "NCHW2c", "NCHW"), ("kHWC8", "NHWC8c", "NCHW"),
    ("kCHW4", "NCHW4c", "NCHW"), ("kCHW16", "NCHW16c", "NCHW"), ("kCHW32", "NCHW32c", "NCHW"),
    ("kDHWC8", "NDHWC8c", "NCDHW"), ("kCDHW32", "NCDHW32c", "NCDHW"), ("kHWC", "NHWC", "NCHW"),
    ("kHWC16", "NHWC16c", "NCHW"), ("kDHWC", "NDHWC", "NCDHW"),
    # oneDNN
    ("nchw", "NCHW", "NCHW"), ("nhwc", "NHWC", "NCHW"), ("nChw8c", "NCHW8c", "NCHW"),
    ("nChw16c", "NCHW16c", "NCHW"), ("OIhw16i16o", "OIHW16i16o", "OIHW"),
    ("OIhw4i16o4i", "OIHW4i16o4i", "OIHW"), ("Ohwi16o", "OHWI16o", "OIHW"), ("goihw", "GOIHW", "GOIHW"),
    # PyTorch
    ("contiguous", "NCHW", "NCHW"), ("channels_last", "NHWC", "NCHW"),
    ("channels_last_3d", "NDHWC", "NCDHW"),
    # MACE OpenCL images (ROWS|COLUMNS|LANES; the array is [height, width, 4])
    ("mace:in_out_channel", "NH|CW|4c", "NHWC"), ("IN_OUT_CHANNEL", "NH|CW|4c", "NCHW"),
    ("mace:in_out_height", "NH|CW|4h", "NHWC"), ("mace:in_out_width", "NH|CW|4w", "NHWC"),
    ("mace:conv2d_filter", "OHW|I|4o", "OIHW"), ("mace:conv2d_filter:v0.6", "OHW|I4i|4o", "HWOI"),
    ("mace:dw_conv2d_filter", "I|MHW|4i", "MIHW"), ("DW_CONV2D_FILTER", "I|MHW|4i", "HWIM"),
    ("mace:argument", "|W|4w", "W"), ("mace:weight_height", "O|HWI|4o", "OIHW"),
    ("mace:weight_width", "O|HWI|4i", "OIHW"),
]

# Extents that are not multiples of any block above.
DIMS = {
    "NCHW": dict(N=2, C=5, H=3, W=7),
    "NHWC": dict(N=2, H=5, W=3, C=6),
    "HWOI": dict(H=3, W=2, O=19, I=13),
    "HWIM": dict(H=3, W=3, I=7, M=2),
    "OIHW": dict(O=19, I=13, H=3, W=2),
    "MIHW": dict(M=2, I=7, H=3, W=3),
    "NCDHW": dict(N=2, C=7, D=3, H=2, W=5),
    "GOIHW": dict(G=2, O=3, I=5, H=3, W=3),
    "W": dict(W=11),
}

DTYPES = ["f32", "f16", "i8", "u8"]
NP = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "u8": np.uint8}


def tokens(canonical):
    """[(block size or None, axis letter upper case)], outermost first."""
    out = []
    for size, letter in re.findall(r"(\d*)([A-Za-z])", canonical):
        out.append((int(size) if size else None, letter.upper()))
    return out


def numpy_layout(x, src_axes, canonical):
    """pad + reshape + transpose: the physical array of `canonical` for logical array x; for an
    image layout ROWS|COLUMNS|LANES, then reshaped to [height, width, 4]."""
    if "|" in canonical:
        rows, cols, _ = canonical.split("|")
        y = numpy_layout(x, src_axes, canonical.replace("|", ""))
        nr, nc = len(tokens(rows)), len(tokens(cols))
        return y.reshape(int(np.prod(y.shape[:nr])), int(np.prod(y.shape[nr:nr + nc])), 4)
    toks = tokens(canonical)
    blocks = {a: [s for s, b in toks if s is not None and b == a] for a in src_axes}
    pads, split_shape, names = [], [], []
    for i, a in enumerate(src_axes):
        prod = int(np.prod(blocks[a])) if blocks[a] else 1
        padded = -(-x.shape[i] // prod) * prod
        pads.append((0, padded - x.shape[i]))
        split_shape += [padded // prod] + blocks[a]
        names += [(None, a)] + [(s, a) for s in blocks[a]]
    # np.pad copies even when nothing is padded; skip it then (the benchmark uses this too).
    y = (np.pad(x, pads) if any(p for _, p in pads) else x).reshape(split_shape)
    # Physical order: the k-th block of an axis in the format is its k-th split.
    seen, order = {}, []
    for s, a in toks:
        k = seen.get(a, 0) if s is not None else None
        if s is not None:
            seen[a] = k + 1
            idx = [j for j, (ss, aa) in enumerate(names) if aa == a and ss is not None][k]
        else:
            idx = names.index((None, a))
        order.append(idx)
    return np.ascontiguousarray(y.transpose(order))


def random_array(shape, dtype, rng):
    if dtype in ("f32", "f16"):
        x = rng.standard_normal(shape).astype(NP[dtype])
        flat = x.reshape(-1)
        if flat.size > 3:
            flat[0], flat[1], flat[2] = np.nan, np.inf, -0.0
        return x
    info = np.iinfo(NP[dtype])
    return rng.integers(info.min, info.max + 1, size=shape, dtype=NP[dtype])


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def main():
    exe = os.path.abspath(sys.argv[1])
    rng = np.random.default_rng(20261122)
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, canonical, src in CASES:
            dims = DIMS[src]
            shape = tuple(dims[a] for a in src)
            dims_arg = ",".join(f"{a}={dims[a]}" for a in src)
            for dtype in DTYPES:
                x = random_array(shape, dtype, rng)
                inp, out, back, want = (os.path.join(tmp, f) for f in ("in.npy", "out.npy", "back.npy", "want.npy"))
                np.save(inp, x)
                engine = "reference" if checked % 5 == 0 else "planned"
                doc = json.loads(run([exe, "convert", inp, out, "--from", src, "--to", name, "--engine", engine, "--dims", dims_arg, "--json"]))
                if doc["to"] != canonical:
                    raise SystemExit(f"{name}: canonical {doc['to']}, expected {canonical}")
                np.save(want, numpy_layout(x, src, canonical))
                # Images need --dims; so do sources whose axes are not the logical order.
                if open(out, "rb").read() != open(want, "rb").read():
                    got = np.load(out)
                    raise SystemExit(f"{name} {dtype}: output differs from numpy (shape {got.shape} vs {np.load(want).shape})")
                # Layouts with the same axes in another order read their dims from --dims too.
                run([exe, "convert", out, back, "--from", name, "--to", src, "--dims", dims_arg])
                if open(back, "rb").read() != open(inp, "rb").read():
                    raise SystemExit(f"{name} {dtype}: converting back does not return the input")
                checked += 1
    print(f"numpy cross-check: {checked} conversions ({len(CASES)} names x {len(DTYPES)} dtypes) "
          "byte-identical to numpy pad+reshape+transpose, and back exactly")


if __name__ == "__main__":
    main()

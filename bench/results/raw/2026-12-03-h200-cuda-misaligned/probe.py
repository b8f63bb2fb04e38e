#!/usr/bin/env python3
"""Converts CUDA tensors whose memory starts mid-vector (a view one element into a buffer) and
compares each result with the CPU engine's; each case runs in a process of its own, since a
misaligned access ends the CUDA context. Prints one line a case: ok, differs, or the error.

Usage: probe.py (with the layoutkit package importable, torch with CUDA)"""
import concurrent.futures, subprocess, sys

CASES = [
    # (from, to, shape, dtype, to dtype[, base]): tile, thin, word, flat, step and gather kernels.
    # With a base layout, `shape` is the logical shape in it and the source is made from it.
    ("NCHW", "NHWC", (2, 67, 33, 35), "float32", None),
    ("NCHW", "NHWC", (2, 136, 12, 20), "float16", None),
    ("NHWC", "NCHW", (2, 200, 10, 12), "float16", None),
    ("NCHW", "NHWC", (2, 3, 45, 47), "float16", None),
    ("NCHW", "NHWC", (2, 200, 14, 14), "int8", None),
    ("NCHW", "NCHW32c", (2, 96, 14, 14), "int8", None),
    ("NCHW32c", "NCHW", (3, 96, 7, 7), "int8", None, "NCHW"),
    ("NCHW32c", "NCHW", (3, 96, 7, 7), "float16", None, "NCHW"),
    ("NCHW", "NCHW32c", (2, 250, 7, 7), "float32", "float16"),
    ("NCHW", "kHWC8", (2, 4, 64, 64), "float16", None),
    ("OIHW", "OIHW16i16o", (37, 3, 7, 7), "float16", None),
    ("OIHW", "OIHW16i16o", (32, 48, 3, 3), "float16", None),
    ("NHWC", "mace:in_out_channel", (2, 19, 17, 10), "float32", None),
    ("NHWC", "mace:in_out_height", (2, 14, 14, 250), "float16", None),
    ("mace:in_out_height", "NHWC", (2, 8, 64, 256), "float16", None, "NHWC"),
    ("NCHW", "NCHW32c", (3, 1, 5, 5), "float32", None),
]

CHILD = r'''
import sys, numpy as np, torch, layoutkit as lk
src, dst, shape, dt, to, which, base = sys.argv[1], sys.argv[2], eval(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
dtype = getattr(torch, dt)
kw = {} if to == "None" else {"dtype": getattr(torch, to)}
if base != "None":
    kw["dims"] = ",".join(f"{d}={e}" for d, e in zip(base, shape))
    x0 = lk.convert((torch.randn(shape) * 40).to(dtype), base, src)
    shape = tuple(x0.shape)
    data = x0.reshape(-1)
else:
    data = (torch.randn(int(np.prod(shape))) * 40).to(dtype)
n = int(np.prod(shape))
off = 1 if which in ("src", "both") else 0
flat = torch.zeros(n + 1, dtype=dtype)
flat[off:off + n] = data
x = flat[off:off + n].view(shape)
want = lk.convert(x, src, dst, **kw)
xg = flat.cuda()[off:off + n].view(shape)
if which in ("dst", "both"):
    m = want.numel()
    out = torch.empty(m + 1, dtype=want.dtype, device="cuda")[1:].view(want.shape)
    lk.convert(xg, src, dst, out=out, **kw)
else:
    out = lk.convert(xg, src, dst, **kw)
torch.cuda.synchronize()
print("ok" if torch.equal(out.cpu(), want) else "differs")
'''

def run(case, which):
    src, dst, shape, dt, to, *base = case
    p = subprocess.run([sys.executable, "-c", CHILD, src, dst, repr(shape), dt, str(to), which,
                        str(base[0] if base else None)], capture_output=True, text=True, timeout=300)
    tail = (p.stdout.strip().splitlines() or [""])[-1]
    err = (p.stderr.strip().splitlines() or [""])[-1]
    return (f"{src}->{dst} {shape} {dt}{'>' + to if to != None else ''} misaligned {which}: "
            f"{tail if p.returncode == 0 else 'error: ' + err[:200]}")


# Several processes at a time; the lines come out in the order of the cases.
with concurrent.futures.ThreadPoolExecutor(6) as pool:
    for line in pool.map(lambda a: run(*a), [(c, w) for c in CASES for w in ("src", "dst", "both")]):
        print(line, flush=True)

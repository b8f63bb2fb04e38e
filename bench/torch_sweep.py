#!/usr/bin/env python3
"""Times PyTorch's CPU conversion of the rows of `layoutkit bench --sweep --json` with the same
thread count, each against a copy of the same bytes timed alternately in the same run, and
compares the two engines' ratios to their own same-run copies (the machine's state drifts between
the two runs; each ratio is taken against a copy timed next to it).

PyTorch does each conversion as one `copy_` (its strided copy/cast kernel, which is what
`contiguous(memory_format=channels_last)` and `permute(...).contiguous()` run) from a view of the
source into a view of a preallocated destination: for NCHW -> NHWC a channels_last tensor, for
the blocked layouts (NCHW32c, kHWC8, OIHW16i16o) the padded physical tensor viewed in logical
order (padding zeroed once at allocation; a partial last block of NCHW32c in a second copy_).
MACE images, and filters whose O or I is not a multiple of 16, have no single-view PyTorch
form and are left out. f32 -> i8 is `.to(torch.int8)` (truncation, where layoutkit
rounds and saturates: the same bytes moved). Bandwidth counts bytes read + written; times are
medians after one warm-up.

With `--layoutkit`, layoutkit's own converter (the Python package, `layoutkit.convert` into a
preallocated output, the same thread count) is timed in the same process too, alternately with
PyTorch's conversion and the copy, and `same_process_ours_over_torch` is PyTorch's median time
over ours: no ratio to two different copies (PyTorch's `copy_` and the sweep's `memcpy` run at
different speeds on some machines: 11-13 against 18-22 GB/s on a Xeon with a 260 MiB L3, which
made the ratios' comparison about 1.5x harsher than the times').

Usage: bench/torch_sweep.py SWEEP.json [--out ROWS.json] [--min-mib 0] [--layoutkit]
(SWEEP.json may also be the output of one `layoutkit bench ... --json` row.)
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
import raw_json

DT = {"f32": torch.float32, "f16": torch.float16, "i8": torch.int8, "u8": torch.uint8}


def dims_of(s):
    return {k: int(v) for k, v in (p.split("=") for p in s.split(","))}


def pad_to(x, dim, mult):
    extra = (-x.shape[dim]) % mult
    if extra == 0:
        return x
    pads = [0, 0] * (x.dim() - 1 - dim) + [0, extra]
    return F.pad(x, pads)


def make(row):
    """(source tensor, destination tensor, conversion) for a sweep row, or None where PyTorch
    has no form. The conversion is one `copy_` from a view of the source, in the destination's
    logical order, into a view of the preallocated destination (padding allocated as zeros once
    and not rewritten per call, where layoutkit writes its fill every call)."""
    d = dims_of(row["dims"])
    st, dt = DT[row["dtype"]], DT[row["to_dtype"]]
    frm, to = row["from"], row["to"]

    def src(shape):
        if st.is_floating_point:
            return torch.rand(shape, dtype=torch.float32).to(st)
        return torch.randint(-100, 100, shape, dtype=st)

    def run(x, xv, y, yv):
        return x, y, lambda: yv.copy_(xv)

    up = lambda v, m: -(-v // m) * m
    if "O" in d:
        o, i, h, w = d["O"], d["I"], d["H"], d["W"]
        if o % 16 or i % 16:
            return None  # padded filter blocks: no single view
        if (frm, to) == ("OIHW", "OIHW16i16o"):
            x = src((o, i, h, w))
            y = torch.empty((o // 16, i // 16, h, w, 16, 16), dtype=dt)
            return x, y, lambda: y.permute(0, 5, 1, 4, 2, 3).copy_(
                x.view(o // 16, 16, i // 16, 16, h, w))
        if (frm, to) == ("OIHW16i16o", "OIHW"):
            x = src((o // 16, i // 16, h, w, 16, 16))
            y = torch.empty((o, i, h, w), dtype=dt)
            return x, y, lambda: y.view(o // 16, 16, i // 16, 16, h, w).copy_(
                x.permute(0, 5, 1, 4, 2, 3))
        return None
    n, c, h, w = d["N"], d["C"], d["H"], d["W"]
    if (frm, to) == ("NCHW", "NHWC"):
        x = src((n, c, h, w))
        y = torch.empty((n, c, h, w), dtype=dt, memory_format=torch.channels_last)
        return run(x, x, y, y)
    if (frm, to) == ("NHWC", "NCHW"):
        x = src((n, h, w, c))
        y = torch.empty((n, c, h, w), dtype=dt)
        return run(x, x.permute(0, 3, 1, 2), y, y)
    full, r = divmod(c, 32)
    if (frm, to) == ("NCHW", "NCHW32c"):
        # Whole blocks in one copy_, the partial last block in a second.
        x = src((n, c, h, w))
        y = torch.zeros((n, up(c, 32) // 32, h, w, 32), dtype=dt)
        y5 = y.permute(0, 1, 4, 2, 3)

        def f():
            if full:
                y5[:, :full].copy_(x[:, :full * 32].view(n, full, 32, h, w))
            if r:
                y5[:, full, :r].copy_(x[:, full * 32:])
        return x, y, f
    if (frm, to) == ("NCHW32c", "NCHW"):
        x = src((n, up(c, 32) // 32, h, w, 32))
        x5 = x.permute(0, 1, 4, 2, 3)
        y = torch.empty((n, c, h, w), dtype=dt)

        def f():
            if full:
                y[:, :full * 32].view(n, full, 32, h, w).copy_(x5[:, :full])
            if r:
                y[:, full * 32:].copy_(x5[:, full, :r])
        return x, y, f
    if (frm, to) == ("NCHW", "kHWC8"):
        x = src((n, c, h, w))
        y = torch.zeros((n, h, w, up(c, 8)), dtype=dt)
        return run(x, x, y, y[..., :c].permute(0, 3, 1, 2))
    if (frm, to) == ("kHWC8", "NCHW"):
        x = src((n, h, w, up(c, 8)))
        y = torch.empty((n, c, h, w), dtype=dt)
        return run(x, x[..., :c].permute(0, 3, 1, 2), y, y)
    return None


def timed(fns, repeats):
    """Medians of each of `fns`, timed alternately (one call of each in turn) after one warm-up
    of each."""
    for f in fns:
        f()
    ts = [[] for _ in fns]
    for _ in range(repeats):
        for t, f in zip(ts, fns):
            t0 = time.perf_counter()
            f()
            t.append(time.perf_counter() - t0)
    return [sorted(t)[len(t) // 2] for t in ts]


def layoutkit_converter(row, x, threads):
    """A call of layoutkit's Python converter for `row` on `x` (the same source tensor PyTorch
    reads) into an output allocated once by a first call."""
    import layoutkit as lk
    args = dict(dims=row["dims"], dtype=row["to_dtype"], threads=threads)
    # The same memory viewed in the source layout's physical shape (PyTorch's tensors for the
    # blocked layouts are shaped for its views, e.g. kHWC8 as (N, H, W, C padded to 8)).
    x = x.view(lk.Layout(row["from"]).physical_shape(row["dims"]))
    y = lk.convert(x, row["from"], row["to"], **args)
    return lambda: lk.convert(x, row["from"], row["to"], out=y, **args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep")
    ap.add_argument("--out")
    ap.add_argument("--min-mib", type=float, default=0.0)
    ap.add_argument("--layoutkit", action="store_true",
                    help="also time layoutkit's Python converter in the same process")
    a = ap.parse_args()
    sweep = raw_json.load(a.sweep)
    if "rows" not in sweep:
        # One row of `layoutkit bench --json` (not a sweep): its tensor's bytes and class.
        row = dict(sweep)
        per = {"f32": 4, "f16": 2, "i8": 1, "u8": 1}
        n = 1
        for v in dims_of(row["dims"]).values():
            n *= v
        row["tensor_bytes"] = n * per[row["dtype"]]
        mib = row["tensor_bytes"] / (1 << 20)
        row["size_class"] = "<1MiB" if mib < 1 else ("1-8MiB" if mib < 8 else ">=8MiB")
        sweep = {"threads": row["threads"], "rows": [row]}
    threads = sweep["threads"]
    torch.set_num_threads(threads)
    out = []
    for row in sweep["rows"]:
        if row["tensor_bytes"] < a.min_mib * (1 << 20):
            continue
        made = make(row)
        if made is None:
            continue
        x, y, f = made
        moved = x.numel() * x.element_size() + y.numel() * y.element_size()
        ca = torch.ones(moved // 2, dtype=torch.uint8)
        cb = torch.empty_like(ca)
        # As the sweep does with --repeats 5.
        repeats = max(5, min(500, (4 << 20) // max(1, row["tensor_bytes"])))
        fns = [f, lambda: cb.copy_(ca)]
        if a.layoutkit:
            fns.append(layoutkit_converter(row, x, threads))
        t, c, *ours = timed(fns, repeats)
        r = {
            "from": row["from"], "to": row["to"], "dims": row["dims"],
            "dtype": row["dtype"], "to_dtype": row["to_dtype"], "threads": threads,
            "size_class": row["size_class"], "torch_gbps": moved / t / 1e9,
            "torch_copy_gbps": moved / c / 1e9, "torch_ratio_to_copy": c / t,
            "ours_gbps": row["gbps"], "ours_ratio_to_copy": row["ratio_to_copy"],
        }
        r["ours_over_torch"] = r["ours_ratio_to_copy"] / r["torch_ratio_to_copy"]
        if ours:
            r["same_process_ours_gbps"] = moved / ours[0] / 1e9
            r["same_process_ours_over_torch"] = t / ours[0]
        out.append(r)
    if a.out:
        json.dump({"torch": torch.__version__, "threads": threads, "rows": out},
                  open(a.out, "w"), indent=1)
    print(f"torch {torch.__version__}, {threads} thread(s), {len(out)} rows")
    print("| class | type | conversion | dims | torch GB/s | torch/copy | ours/copy | ours/torch |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for r in sorted(out, key=lambda r: r["ours_over_torch"])[:15]:
        ty = r["dtype"] if r["dtype"] == r["to_dtype"] else f'{r["dtype"]}>{r["to_dtype"]}'
        print(f'| {r["size_class"]} | {ty} | {r["from"]}->{r["to"]} | {r["dims"]} | '
              f'{r["torch_gbps"]:.2f} | {100 * r["torch_ratio_to_copy"]:.0f}% | '
              f'{100 * r["ours_ratio_to_copy"]:.0f}% | {r["ours_over_torch"]:.2f} |')
    for cls in ["<1MiB", "1-8MiB", ">=8MiB"]:
        rs = [r["ours_over_torch"] for r in out if r["size_class"] == cls]
        if rs:
            rs.sort()
            slower = sum(1 for v in rs if v < 1.0)
            print(f"{cls}: {len(rs)} rows, ours/torch median {rs[len(rs) // 2]:.2f}, "
                  f"min {rs[0]:.2f}, {slower} rows slower than torch")
        sp = sorted(r["same_process_ours_over_torch"] for r in out
                    if r["size_class"] == cls and "same_process_ours_over_torch" in r)
        if sp:
            print(f"{cls}, same process (PyTorch's time over ours): median {sp[len(sp) // 2]:.2f}, "
                  f"min {sp[0]:.2f}, {sum(1 for v in sp if v < 1.0)} rows slower than torch")
    worst = sorted((r for r in out if "same_process_ours_over_torch" in r),
                   key=lambda r: r["same_process_ours_over_torch"])[:15]
    if worst:
        print("| same process: type | conversion | dims | ours GB/s | torch GB/s | torch time / ours |")
        print("|---|---|---|---:|---:|---:|")
        for r in worst:
            ty = r["dtype"] if r["dtype"] == r["to_dtype"] else f'{r["dtype"]}>{r["to_dtype"]}'
            print(f'| {ty} | {r["from"]}->{r["to"]} | {r["dims"]} | {r["same_process_ours_gbps"]:.2f} | '
                  f'{r["torch_gbps"]:.2f} | {r["same_process_ours_over_torch"]:.2f} |')


if __name__ == "__main__":
    main()

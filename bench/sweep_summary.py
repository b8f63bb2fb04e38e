#!/usr/bin/env python3
"""Summarises `layoutkit bench --sweep --json` files as Markdown: per file and size class the
row count, the median and lowest ratio to the same-run copy, how many rows meet the class's goal
(CPU: 8 MiB and more 80% of the copy, under 1 MiB 50%; CUDA: 8 MiB and more 90% of the device
copy, under 1 MiB within 1.5x of an empty kernel's launch), the five worst rows, and the worst
row of each conversion and type in the 8 MiB class.

Usage: bench/sweep_summary.py SWEEP.json [SWEEP.json ...]
"""
import json
import sys
import raw_json

GOAL = {">=8MiB": 0.8, "<1MiB": 0.5}
CUDA_GOAL = {">=8MiB": 0.9}


def ty(r):
    return r["dtype"] if r["dtype"] == r["to_dtype"] else f'{r["dtype"]}>{r["to_dtype"]}'


def row_line(r):
    return (f'| {ty(r)} | {r["from"]}->{r["to"]} | {r["dims"]} | '
            f'{r["tensor_bytes"] / (1 << 20):.2f} | {r["gbps"]:.2f} | {r["copy_gbps"]:.2f} | '
            f'{100 * r["ratio_to_copy"]:.0f}% |')


def main():
    for path in sys.argv[1:]:
        s = raw_json.load(path)
        rows = s["rows"]
        cuda = s.get("device") == "cuda"
        if cuda:
            small = [r["over_empty_kernel"] for r in rows if "over_empty_kernel" in r]
            print(f'### {path.split("/")[-1]}: CUDA ({s.get("gpu")}), {len(rows)} rows, empty kernel '
                  f'{s["empty_kernel_s"] * 1e6:.2f} us; rows of 1 MiB or less within 1.5x of it: '
                  f'{sum(1 for v in small if v <= 1.5)} of {len(small)}, worst {max(small, default=0):.2f}x\n')
        else:
            print(f'### {path.split("/")[-1]}: {s["threads"]} thread(s), kernels {s["kernels"]}, '
                  f'{len(rows)} rows, per-call overhead {s["call_overhead_s"] * 1e6:.2f} us\n')
        print("| size class | rows | median | lowest | rows at goal |")
        print("|---|---:|---:|---:|---|")
        for cls in ["<1MiB", "1-8MiB", ">=8MiB"]:
            rs = sorted(r["ratio_to_copy"] for r in rows if r["size_class"] == cls)
            if not rs:
                continue
            goal = (CUDA_GOAL if cuda else GOAL).get(cls)
            met = (f'{sum(1 for v in rs if v >= goal)} of {len(rs)} (>= {100 * goal:.0f}%)'
                   if goal else "-")
            print(f"| {cls} | {len(rs)} | {100 * rs[len(rs) // 2]:.0f}% | "
                  f"{100 * rs[0]:.0f}% | {met} |")
        for cls in ["<1MiB", ">=8MiB"]:
            rs = sorted((r for r in rows if r["size_class"] == cls),
                        key=lambda r: r["ratio_to_copy"])[:5]
            print(f"\nWorst five, {cls}:\n")
            print("| type | conversion | dims | MiB | GB/s | copy GB/s | ratio |")
            print("|---|---|---|---:|---:|---:|---:|")
            for r in rs:
                print(row_line(r))
        print("\nWorst row per conversion and type, >=8MiB:\n")
        print("| type | conversion | dims | MiB | GB/s | copy GB/s | ratio |")
        print("|---|---|---|---:|---:|---:|---:|")
        worst = {}
        for r in rows:
            if r["size_class"] != ">=8MiB":
                continue
            k = (r["from"], r["to"], ty(r))
            if k not in worst or r["ratio_to_copy"] < worst[k]["ratio_to_copy"]:
                worst[k] = r
        for r in sorted(worst.values(), key=lambda r: r["ratio_to_copy"]):
            print(row_line(r))
        print()


if __name__ == "__main__":
    main()

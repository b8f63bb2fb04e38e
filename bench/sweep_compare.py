#!/usr/bin/env python3
"""Compares two `layoutkit bench --sweep --json` files of the same rows (e.g. two builds, run
back to back on one machine) as Markdown: per conversion and size class the row count, the
median ratio to the same-run copy before -> after, the rows at the class's goal (8 MiB and
more: 80% of the copy; under 1 MiB: 50%) before -> after, and the lowest row after; then the
worst rows of 8 MiB and more after, and the rows that moved by more than 15% either way.

Usage: bench/sweep_compare.py BEFORE.json AFTER.json
"""
import json
import statistics
import sys
import raw_json

GOAL = {">=8MiB": 0.8, "<1MiB": 0.5}


def load(path):
    rows = raw_json.load(path)["rows"]
    return {(r["from"], r["to"], r["dtype"], r["to_dtype"], r["dims"]): r for r in rows}


def ratio(r):
    return r["ratio_to_copy"]


def main():
    before, after = load(sys.argv[1]), load(sys.argv[2])
    keys = [k for k in before if k in after]
    print("| conversion | class | rows | median before -> after | at goal before -> after | "
          "lowest after |")
    print("|---|---|---:|---|---|---:|")
    for conv in sorted({k[:2] for k in keys}):
        for cls, goal in GOAL.items():
            ks = [k for k in keys if k[:2] == conv and before[k]["size_class"] == cls]
            if not ks:
                continue
            mb = statistics.median(ratio(before[k]) for k in ks)
            ma = statistics.median(ratio(after[k]) for k in ks)
            gb = sum(ratio(before[k]) >= goal for k in ks)
            ga = sum(ratio(after[k]) >= goal for k in ks)
            lo = min(ks, key=lambda k: ratio(after[k]))
            print(f"| {conv[0]}->{conv[1]} | {cls} | {len(ks)} | {mb:.0%} -> {ma:.0%} | "
                  f"{gb} -> {ga} | {ratio(after[lo]):.0%} ({lo[2]} {lo[4]}) |")
    print()
    big = [k for k in keys if before[k]["size_class"] == ">=8MiB"]
    print("Worst rows of 8 MiB and more after:")
    print()
    for k in sorted(big, key=lambda k: ratio(after[k]))[:8]:
        print(f"* {k[2]} {k[0]}->{k[1]} {k[4]}: {ratio(before[k]):.0%} -> {ratio(after[k]):.0%}")
    moved = [ratio(after[k]) / ratio(before[k]) for k in keys]
    print()
    print(f"Rows more than 15% faster: {sum(m > 1.15 for m in moved)}, more than 15% slower: "
          f"{sum(m < 1 / 1.15 for m in moved)}, of {len(keys)}.")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Row by row comparison of two CPU sweep passes (JSON of `layoutkit bench --sweep --json`):
GB/s new over base by size class (geometric mean), rows at goal in each pass, and the rows
that moved by more than a factor (default 1.5) either way.

Usage: compare.py BASE.json NEW.json [FACTOR]"""
import gzip, json, math, sys

load = lambda p: json.load(gzip.open(p) if p.endswith('.gz') else open(p))
base, new = (load(p) for p in sys.argv[1:3])
factor = float(sys.argv[3]) if len(sys.argv) > 3 else 1.5
key = lambda r: (r['from'], r['to'], r['dtype'], r['to_dtype'], r['dims'])
b = {key(r): r for r in base['rows']}
n = {key(r): r for r in new['rows']}
goal = {'<1MiB': 0.5, '>=8MiB': 0.8}
for sc in ('<1MiB', '1-8MiB', '>=8MiB'):
    ks = [k for k in b if k in n and b[k]['size_class'] == sc]
    if not ks:
        continue
    g = math.exp(sum(math.log(n[k]['gbps'] / b[k]['gbps']) for k in ks) / len(ks))
    line = f"{sc:7} {len(ks):5} rows: GB/s new/base geometric mean {g:.3f}"
    if sc in goal:
        at = lambda d: sum(1 for k in ks if d[k]['ratio_to_copy'] >= goal[sc])
        line += f", at {goal[sc]:.0%} of the copy {at(b)} -> {at(n)}"
    print(line)
moved = sorted((n[k]['gbps'] / b[k]['gbps'], k) for k in b if k in n)
print(f"rows faster or slower than {factor}x:")
for x, k in moved:
    if x >= factor or x <= 1 / factor:
        ty = k[2] if k[2] == k[3] else k[2] + '>' + k[3]
        print(f"  {x:5.2f}x {ty:8} {k[0]}->{k[1]} {k[4]}  ratio {b[k]['ratio_to_copy']:.2f} -> {n[k]['ratio_to_copy']:.2f}")

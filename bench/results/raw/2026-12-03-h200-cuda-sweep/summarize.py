#!/usr/bin/env python3
"""Summarizes alternated family passes of two builds: per row the mean over rounds of each
build's GB/s and ratio to the device copy (timed in the same pass), rows split by whether the
new build changes their kernels (CHANGED: `FROM->TO TYPE DIMS` a line, from changed_rows.py).

Usage: summarize.py DIR OLD NEW CHANGED [--rows]
DIR holds fam-BUILD-ROUND-I.json.gz."""
import collections, glob, gzip, json, math, os, sys

d, old, new, changed = sys.argv[1:5]
show = '--rows' in sys.argv
label = lambda r: f"{r['from']}->{r['to']} {r['dtype'] if r['dtype'] == r['to_dtype'] else r['dtype'] + '>' + r['to_dtype']} {r['dims']}"
ch = {l.strip() for l in open(changed) if l.strip()}
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for b in (old, new):
    for f in sorted(glob.glob(os.path.join(d, f'fam-{b}-*.json.gz'))):
        for r in json.load(gzip.open(f))['rows']:
            runs[label(r)][b].append(r)
mean = lambda xs: sum(xs) / len(xs)
groups = collections.defaultdict(list)
for lab, bs in runs.items():
    if old not in bs or new not in bs:
        continue
    o, n = bs[old], bs[new]
    large = o[0]['size_class'] == '>=8MiB'
    g = ('32 MiB' if large else 'under 1 MiB' if o[0]['size_class'] == '<1MiB' else '1-8 MiB',
         'changed' if lab in ch else 'unchanged')
    ro, rn = mean([r['ratio_to_copy'] for r in o]), mean([r['ratio_to_copy'] for r in n])
    go, gn = mean([r['gbps'] for r in o]), mean([r['gbps'] for r in n])
    groups[g].append((lab, ro, rn, gn / go, len(o), len(n)))
for g in sorted(groups):
    v = groups[g]
    gm = math.exp(mean([math.log(x[3]) for x in v]))
    print(f"{g[0]:>12} {g[1]:>9}: {len(v):4} rows, GB/s {new}/{old} geomean {gm:.3f}, range "
          f"{min(x[3] for x in v):.2f}-{max(x[3] for x in v):.2f}x, at 90% of the copy "
          f"{sum(x[1] >= 0.9 for x in v)} -> {sum(x[2] >= 0.9 for x in v)}")
if show:
    for g in sorted(groups):
        if g[0] != '32 MiB':
            continue
        print(f"\n{g[0]} {g[1]} (ratio to the copy {old} -> {new}, GB/s ratio; passes per build)")
        for lab, ro, rn, x, no, nn in sorted(groups[g][:], key=lambda t: t[0]):
            print(f"  {lab:55} {ro:.2f} -> {rn:.2f}  {x:.2f}x  ({no}/{nn})")

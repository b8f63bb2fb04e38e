#!/usr/bin/env python3
"""Summarises ab.sh's passes: per row the median over passes of each build's GB/s and ratio
to the same-pass copy; new over base by size class (geometric mean of the GB/s medians) and
the rows that moved by 1.2x or more.

Usage: ab_summary.py DIR"""
import glob, gzip, json, math, os, statistics, sys, collections

d = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(os.path.join(d, '*.json*')):
    v = os.path.basename(f).split('-')[1]
    for r in json.load(gzip.open(f) if f.endswith('.gz') else open(f))['rows']:
        k = (r['from'] + '->' + r['to'], r['dtype'] if r['dtype'] == r['to_dtype'] else r['dtype'] + '>' + r['to_dtype'], r['dims'], r['size_class'])
        rows[k][v].append((r['gbps'], r['ratio_to_copy']))
med = lambda xs, i: statistics.median(x[i] for x in xs)
by = collections.defaultdict(list)
for k, v in sorted(rows.items()):
    if 'base' in v and 'new' in v:
        x = med(v['new'], 0) / med(v['base'], 0)
        by[k[3]].append(x)
        if x >= 1.2 or x <= 1 / 1.2:
            print(f"{x:5.2f}x {k[1]:8} {k[0]} {k[2]}  ratio to copy {med(v['base'], 1):.2f} -> {med(v['new'], 1):.2f}")
for sc, xs in by.items():
    print(f"{sc}: {len(xs)} rows, new/base {math.exp(sum(map(math.log, xs)) / len(xs)):.3f} (range {min(xs):.2f}-{max(xs):.2f})")

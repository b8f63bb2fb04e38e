#!/usr/bin/env python3
"""Summarises ab.txt (lines `ROUND VARIANT JSON`): per row the mean over rounds of each
variant's ratio to the same-run device copy, and each variant's GB/s over base (geometric
mean, range, rows of 8 MiB and more at 90% of the copy).

Usage: ab_summary.py ab.txt"""
import json, math, sys, collections
r = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    rnd, v, js = line.split(' ', 2)
    try:
        d = json.loads(js)
    except ValueError:
        continue
    key = (d['from'] + '->' + d['to'], d['dtype'] + ('>' + d['to_dtype'] if d['to_dtype'] != d['dtype'] else ''), d['dims'], d['bytes_moved'])
    r[key][v].append((d['gbps'], d['ratio_to_copy']))
variants = sys.argv[2:] or ['new', 'fw4', 'nosteps']
mean = lambda xs: sum(xs) / len(xs)
print(f"{'conversion':24} {'type':8} {'dims':26} {'MiB':>6} " + ' '.join(f"{v:>8}" for v in ['base'] + variants) + '  (ratio to copy; then GB/s over base)')
big = collections.defaultdict(list)
small = collections.defaultdict(list)
at90 = collections.Counter()
for key in sorted(r):
    vs = r[key]
    if 'base' not in vs:
        continue
    mib = key[3] / 2 / 2**20
    rat = {v: mean([x[1] for x in vs[v]]) for v in vs}
    gb = {v: mean([x[0] for x in vs[v]]) for v in vs}
    line = f"{key[0]:24} {key[1]:8} {key[2]:26} {mib:6.1f} " + ' '.join(f"{rat.get(v, float('nan')):8.2f}" for v in ['base'] + variants)
    line += '  ' + ' '.join(f"{gb[v] / gb['base']:.2f}x" if v in gb else '-' for v in variants)
    print(line)
    for v in ['base'] + variants:
        if v in gb:
            (big if mib >= 8 else small)[v].append(gb[v] / gb['base'])
            if mib >= 8 and rat[v] >= 0.9:
                at90[v] += 1
for name, d in (('>= 8 MiB', big), ('< 8 MiB', small)):
    for v in variants:
        xs = d[v]
        if xs:
            g = math.exp(sum(map(math.log, xs)) / len(xs))
            print(f"{name}: {v} / base over {len(xs)} rows: geometric mean {g:.3f}, range {min(xs):.2f}-{max(xs):.2f}" + (f", at 90% of the copy: base {at90['base']} -> {at90[v]}" if name == '>= 8 MiB' else ''))

#!/usr/bin/env python3
"""Compare two builds over whole sweeps: files NAME-base-ROUND.json[.gz] and NAME-new-ROUND.json[.gz]
(`layoutkit bench --sweep --json`, the builds alternated). Per row, each build's best GB/s and best
ratio to the copy over its rounds; per size class (< 1 MiB, >= 8 MiB): the geometric mean of new / base
GB/s, how many rows reach the class's goal (50% / 80% of the copy) with each build, the median ratio,
how many rows moved by more than 10% either way, and the rows that moved most.
Usage: bench/sweep_ab_best.py "GLOB"."""
import collections
import glob
import math
import statistics
import sys

import raw_json

GOAL = {'<1MiB': 0.5, '>=8MiB': 0.8}

rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(sys.argv[1]):
    build = f.split('/')[-1].split('-')[1]
    for r in raw_json.load(f)['rows']:
        key = (r['size_class'], r['dtype'], r['to_dtype'], r['from'], r['to'], r['dims'])
        rows[key][build].append((r['gbps'], r['ratio_to_copy']))
for cls, goal in GOAL.items():
    moved, at, ratios = [], collections.Counter(), collections.defaultdict(list)
    for key, v in rows.items():
        if key[0] != cls or not {'base', 'new'} <= v.keys():
            continue
        gbps = {b: max(x[0] for x in v[b]) for b in ('base', 'new')}
        best = {b: max(x[1] for x in v[b]) for b in ('base', 'new')}
        moved.append((gbps['new'] / gbps['base'], key[1:], best['base'], best['new']))
        for b in ('base', 'new'):
            at[b] += best[b] >= goal
            ratios[b].append(best[b])
    if not moved:
        continue
    g = math.exp(sum(math.log(m[0]) for m in moved) / len(moved))
    print(f"{cls}: {len(moved)} rows, GB/s new / base {g:.3f} (geometric mean); rows at {goal:.0%}: "
          f"base {at['base']}, new {at['new']}; median ratio base {statistics.median(ratios['base']):.3f}, "
          f"new {statistics.median(ratios['new']):.3f}; >10% faster {sum(m[0] > 1.1 for m in moved)}, "
          f">10% slower {sum(m[0] < 0.9 for m in moved)}")
    moved.sort()
    for m in moved[:8] + moved[-8:]:
        print(f"  {m[0]:.2f} {' '.join(m[1])}  {m[2]:.0%} -> {m[3]:.0%}")

#!/usr/bin/env python3
"""A/B of two builds over sweep files DIR/fam-BUILD-PASS-I.json[.gz] (alternated passes): per row the
best GB/s and best ratio to the device copy of each build; for the rows listed in ROWS (those
whose kernels the change touches) and the others: geometric mean of GB/s new / old per size
class, rows of 8 MiB and more at 90% of the copy, and the changed rows one by one.
Rows listed in the optional EXCLUDE file (changed by the A/B's new build but not by the change
reported) are left out of both groups.
Usage: ab.py DIR OLD NEW ROWS [EXCLUDE]"""
import collections, glob, gzip, json, math, sys

d, old, new, rows_file = sys.argv[1:5]
def rows_of(path):
    out = set()
    for line in open(path):
        conv, ty, dims = line.split()
        f, t = conv.split('->')
        out.add((f, t, ty, dims))
    return out


changed = rows_of(rows_file)
exclude = rows_of(sys.argv[5]) if len(sys.argv) > 5 else set()
best = collections.defaultdict(dict)
for path in glob.glob(f'{d}/fam-*.json*'):
    b = path.split('/')[-1].split('-')[1]
    for r in json.load(gzip.open(path) if path.endswith('.gz') else open(path))['rows']:
        ty = r['dtype'] if r['dtype'] == r['to_dtype'] else f"{r['dtype']}>{r['to_dtype']}"
        k = (r['from'], r['to'], ty, r['dims'])
        cur = best[k].get(b)
        g, q = r['gbps'], r['ratio_to_copy']
        e = r.get('over_empty_kernel')
        best[k][b] = (max(g, cur[0]), max(q, cur[1]), r['size_class'],
                      min(e, cur[3]) if e is not None and cur[3] is not None else e) if cur else (g, q, r['size_class'], e)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')
for cls in ['<1MiB', '>=8MiB']:
    for part, sel in [('changed', True), ('unchanged', False)]:
        ks = [k for k, v in best.items() if old in v and new in v and v[old][2] == cls
              and (k in changed) == sel and k not in exclude]
        if not ks:
            continue
        rs = [best[k][new][0] / best[k][old][0] for k in ks]
        line = f'{cls} {part}: {len(ks)} rows, GB/s {new}/{old} geomean {gm(rs):.3f}, min {min(rs):.2f}, max {max(rs):.2f}'
        if cls == '>=8MiB':
            a = sum(best[k][old][1] >= 0.9 for k in ks); b = sum(best[k][new][1] >= 0.9 for k in ks)
            line += f'; at 90% of the copy {a} -> {b}'
        else:
            a = sum((best[k][old][3] or 9) <= 1.5 for k in ks); b = sum((best[k][new][3] or 9) <= 1.5 for k in ks)
            line += f'; within 1.5x of an empty launch {a} -> {b}'
        print(line)
print()
ks = sorted((k for k in changed if k in best and old in best[k] and new in best[k] and best[k][old][2] == '>=8MiB'),
            key=lambda k: best[k][new][0] / best[k][old][0])
for k in ks:
    o, n = best[k][old], best[k][new]
    print(f'{n[0] / o[0]:.2f}x  {k[0]:>18} -> {k[1]:<20} {k[2]:8} {k[3]:26} {o[1]:.2f} -> {n[1]:.2f}')

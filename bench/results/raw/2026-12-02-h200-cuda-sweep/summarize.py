#!/usr/bin/env python3
"""The tables of section.md from this folder's raw files.

* whole sweep, second call (run2.sh): the build before (base) and the first rule (steps), one
  pass each, per size class and for the rows whose kernels the first rule changes
  (steps-rows.txt) and the others; the changed rows of 32 MiB one by one (best of the two
  passes of steps, sweep-steps-1 from the first call, over base).
* families, third call (run3.sh): the final rule (final) and base, one pass each, for the rows
  the final rule changes (final-rows.txt) and the others.
* rows of 32 MiB at 90% of the device copy: each whole pass, and a projection for the final
  build (each row from the pass whose kernels it shares).
Usage: summarize.py (in this folder)"""
import collections, glob, gzip, json, math


def load(p):
    f = gzip.open(p) if p.endswith('.gz') else open(p)
    out = {}
    for r in json.load(f)['rows']:
        ty = r['dtype'] if r['dtype'] == r['to_dtype'] else r['dtype'] + '>' + r['to_dtype']
        out['%s->%s %s %s' % (r['from'], r['to'], ty, r['dims'])] = r
    return out


rows = lambda p: set(l.strip() for l in open(p))
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
b2, s1, s2 = (load(f'sweep-{n}.json.gz') for n in ('base-2', 'steps-1', 'steps-2'))
steps, final, between = rows('steps-rows.txt'), rows('final-rows.txt'), rows('steps-final-rows.txt')
big = [k for k in b2 if b2[k]['size_class'] == '>=8MiB']


def table(old, new, changed, label):
    for cls in ['>=8MiB', '<1MiB']:
        for part in [True, False]:
            ks = [k for k in old if k in new and old[k]['size_class'] == cls and (k in changed) == part]
            if not ks:
                continue
            rs = sorted(new[k]['gbps'] / old[k]['gbps'] for k in ks)
            line = (f"{label} {cls} {'changed' if part else 'unchanged'}: {len(ks)} rows, GB/s "
                    f"geomean {gm(rs):.3f}, min {rs[0]:.2f}, 5% {rs[len(rs) // 20]:.2f}, "
                    f"95% {rs[-1 - len(rs) // 20]:.2f}, max {rs[-1]:.2f}")
            if cls == '>=8MiB':
                line += (f"; at 90% of the copy {sum(old[k]['ratio_to_copy'] >= 0.9 for k in ks)} -> "
                         f"{sum(new[k]['ratio_to_copy'] >= 0.9 for k in ks)}")
            print(line)


table(b2, s2, steps, 'whole sweep, base-2 -> steps-2:')
for name, run in [('base-2', b2), ('steps-1', s1), ('steps-2', s2)]:
    print(f'whole pass {name}: {sum(run[k]["ratio_to_copy"] >= 0.9 for k in big)} of {len(big)} rows of 32 MiB at 90%')
fin, base = {}, {}
for p in glob.glob('final-ab/fam-final-*.json.gz'):
    fin.update(load(p))
for p in glob.glob('final-ab/fam-base-*.json.gz'):
    base.update(load(p))
print()
table(base, fin, final, 'families, base -> final:')
print()
print('changed rows of 32 MiB, final over base (third call):')
ks = sorted((k for k in fin if k in base and k in final and base[k]['size_class'] == '>=8MiB'),
            key=lambda k: fin[k]['gbps'] / base[k]['gbps'])
for k in ks:
    print('  %.2fx  %-58s %.2f -> %.2f' % (fin[k]['gbps'] / base[k]['gbps'], k, base[k]['ratio_to_copy'], fin[k]['ratio_to_copy']))
src, at = collections.Counter(), 0
for k in big:
    if k not in final:
        r, w = b2[k]['ratio_to_copy'], 'base kernels: base-2'
    elif k not in between:
        r, w = s2[k]['ratio_to_copy'], 'first-rule kernels: steps-2'
    elif k in fin:
        r, w = fin[k]['ratio_to_copy'], 'final-only kernels: third call'
    else:
        r, w = s2[k]['ratio_to_copy'], 'final-only kernels, not measured: steps-2'
    src[w] += 1
    at += r >= 0.9
print()
print(f'projection, final build: {at} of {len(big)} rows of 32 MiB at 90% ({dict(src)})')
print()
print('changed rows of 32 MiB, first rule over base (best of steps-1, steps-2 over base-2):')
ks = sorted((k for k in big if k in steps), key=lambda k: max(s1[k]['gbps'], s2[k]['gbps']) / b2[k]['gbps'])
for k in ks:
    print('  %.2fx  %-58s %.2f -> %.2f' % (max(s1[k]['gbps'], s2[k]['gbps']) / b2[k]['gbps'], k, b2[k]['ratio_to_copy'],
                                          max(s1[k]['ratio_to_copy'], s2[k]['ratio_to_copy'])))

#!/usr/bin/env python3
"""Two single whole-sweep passes (`layoutkit bench --sweep --device cuda --json`), OLD and NEW,
and the rows whose kernels the change alters (ROWS, one `FROM->TO TYPE DIMS` per line): per
size class the geometric mean of GB/s new / old for the changed rows and for the others, rows
of 8 MiB and more at 90% of the device copy, and rows of 1 MiB or less within 1.5x of each
run's own empty-kernel launch.
Usage: whole.py OLD.json.gz NEW.json.gz ROWS"""
import gzip, json, math, sys

def load(p):
    return json.load(gzip.open(p) if p.endswith('.gz') else open(p))

def key(r):
    ty = r['dtype'] if r['dtype'] == r['to_dtype'] else f"{r['dtype']}>{r['to_dtype']}"
    return (r['from'], r['to'], ty, r['dims'])

a, b = (load(p) for p in sys.argv[1:3])
ch = set()
for line in open(sys.argv[3]):
    conv, ty, dims = line.split()
    f, t = conv.split('->')
    ch.add((f, t, ty, dims))
print(f"empty kernel: {a['empty_kernel_s'] * 1e6:.2f} us (old run), {b['empty_kernel_s'] * 1e6:.2f} us (new run)")
A = {key(r): r for r in a['rows']}
B = {key(r): r for r in b['rows']}
for cls in ['<1MiB', '>=8MiB']:
    for part in [True, False]:
        ks = [k for k in A if A[k]['size_class'] == cls and (k in ch) == part and k in B]
        g = math.exp(sum(math.log(B[k]['gbps'] / A[k]['gbps']) for k in ks) / len(ks))
        s = f"{cls} {'changed' if part else 'unchanged'}: {len(ks)} rows, GB/s new / old {g:.3f}"
        if cls == '>=8MiB':
            s += f"; at 90% of the copy {sum(A[k]['ratio_to_copy'] >= 0.9 for k in ks)} -> {sum(B[k]['ratio_to_copy'] >= 0.9 for k in ks)}"
        else:
            s += f"; within 1.5x of the run's empty launch {sum(A[k].get('over_empty_kernel', 9) <= 1.5 for k in ks)} -> {sum(B[k].get('over_empty_kernel', 9) <= 1.5 for k in ks)}"
        print(s)

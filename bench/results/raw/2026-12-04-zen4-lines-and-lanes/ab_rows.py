#!/usr/bin/env python3
"""A/B over sweep rows: each row run by variant A and B in turn (order swapped every round),
`rounds` rounds; variants are (binary, extra env). Writes OUT/<v>-<round>.json as sweep JSON.
Usage: ab_rows.py ROWS OUT ROUNDS THREADS A_BIN A_ENV B_BIN B_ENV   (ENV: K=V,K=V or -)"""
import json, os, subprocess, sys
rows, out, rounds, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
vs = {'base': (sys.argv[5], sys.argv[6]), 'new': (sys.argv[7], sys.argv[8])}
os.makedirs(out, exist_ok=True)
labels = [l.strip() for l in open(rows) if l.strip()]
acc = {(v, r): [] for v in vs for r in range(rounds)}
for r in range(rounds):
    for i, lab in enumerate(labels):
        order = ['base', 'new'] if (r + i) % 2 == 0 else ['new', 'base']
        for v in order:
            b, e = vs[v]
            env = dict(os.environ)
            if e != '-':
                env.update(dict(kv.split('=', 1) for kv in e.split(',')))
            p = subprocess.run([b, 'bench', '--sweep', '--sweep-filter', lab, '--threads', threads,
                                '--repeats', '7', '--json'], env=env, capture_output=True, text=True)
            doc = json.loads(p.stdout)
            acc[(v, r)] += [x for x in doc['rows'] if f"{x['from']}->{x['to']}" == lab.split()[0] and x['dims'] == lab.split()[2] and (x['dtype'] if x['dtype'] == x['to_dtype'] else x['dtype'] + '>' + x['to_dtype']) == lab.split()[1]]
    for v in vs:
        json.dump({'rows': acc[(v, r)]}, open(f"{out}/x-{v}-{r}.json", 'w'))
    print('round', r, 'done', flush=True)

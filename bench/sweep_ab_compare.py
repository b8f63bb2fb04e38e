#!/usr/bin/env python3
"""Compare two builds on sweep rows: files NAME-base-ROUND-FILTER.json and NAME-new-ROUND-FILTER.json (from
`layoutkit bench --sweep --sweep-filter F --json`, the builds alternated); each row's best ratio to the copy per build,
the twelve largest losses and gains and the geometric mean of new / base. Usage: bench/sweep_ab_compare.py "GLOB"."""
import json,glob,collections,math,sys
import raw_json
d=collections.defaultdict(dict)
for f in glob.glob(sys.argv[1]):
    k=f.split('/')[-1].split('-')[1]
    for row in raw_json.load(f)['rows']:
        key=(row['dtype'],row['from']+'->'+row['to'],row['dims'])
        d[key].setdefault(k,[]).append(row['ratio_to_copy'])
ch=[]
for key,v in sorted(d.items()):
    a=max(v['base']); b=max(v['new'])
    ch.append((b/a,key,a,b,v['base'],v['new']))
ch.sort()
for x in ch[:12]+ch[-12:]:
    print(f"{x[0]:.2f} {x[1]} {x[2]*100:.0f}% -> {x[3]*100:.0f}%  base {[round(y*100) for y in x[4]]} new {[round(y*100) for y in x[5]]}")
print(len(ch), 'geomean', math.exp(sum(math.log(x[0]) for x in ch)/len(ch)))

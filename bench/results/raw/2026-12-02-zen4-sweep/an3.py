import json,sys,collections,statistics
d=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    p=line.split(' ',6); side=p[0]; key=' '.join(p[1:6]); j=json.loads(p[6])
    r=j['rows'][0] if 'rows' in j else j
    d[key][side].append((r['ratio_to_copy'], r['gbps'], r['copy_gbps']))
for k,v in d.items():
    s=[]
    for side in sorted(v):
        rs=v[side]; s.append(f"{side}: {statistics.median(x[0] for x in rs)*100:4.0f}% {statistics.median(x[1] for x in rs):5.2f} GB/s (copy {statistics.median(x[2] for x in rs):5.2f})")
    print(f"{k:60} " + " | ".join(s))

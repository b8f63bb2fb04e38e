import json,collections,statistics,math,sys
d=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    p=line.split(' ',6); side=p[0]; key=' '.join(p[1:6]); j=json.loads(p[6])
    r=j['rows'][0] if 'rows' in j else j
    d[key][side].append(r['ratio_to_copy'])
ch=[]
for k,v in d.items():
    a=statistics.median(v['A']); b=statistics.median(v['B'])
    ch.append((b/a,a,b,k,v['A'],v['B']))
for x in sorted(ch): print(f"{x[0]:.3f} {x[1]*100:4.0f} -> {x[2]*100:4.0f}  {x[3]}  A={[round(y*100) for y in x[4]]} B={[round(y*100) for y in x[5]]}")
print(len(ch), 'geo', math.exp(sum(math.log(x[0]) for x in ch)/max(1,len(ch))))

# Summary of ab.sh output: per row the median of each side's rounds, per size class the geometric
# mean of B / A, rows at the goal, the five rows that moved most each way. Usage: an2.py FILE
import json,sys,collections,math,statistics
d=collections.defaultdict(lambda: collections.defaultdict(list))
sizes={}
for line in open(sys.argv[1]):
    p=line.split(' ',6); side=p[0]; key=' '.join(p[1:6]); j=json.loads(p[6])
    r=j['rows'][0] if 'rows' in j else j
    d[key][side].append(r['ratio_to_copy'])
    n=1
    for x in p[3].split(','): n*=int(x.split('=')[1])
    sizes[key]=n*{'f32':4,'f16':2,'i8':1,'u8':1}[p[4]]
for cls,goal,test in (('>=8MiB',0.8,lambda s:s>=8<<20),('<1MiB',0.5,lambda s:s<1<<20)):
    ks=[k for k in d if test(sizes[k]) and 'A' in d[k] and 'B' in d[k]]
    if not ks: continue
    med={k:(statistics.median(d[k]['A']),statistics.median(d[k]['B'])) for k in ks}
    lr=[math.log(b/a) for a,b in med.values()]
    print(f"{cls}: {len(ks)} rows, median-of-rounds B/A geomean {math.exp(sum(lr)/len(lr)):.3f}, at goal {sum(a>=goal for a,b in med.values())} -> {sum(b>=goal for a,b in med.values())}")
    srt=sorted(ks,key=lambda k:med[k][1]/med[k][0])
    for k in srt[:5]+['...']+srt[-5:]:
        if k=='...': print('   ...'); continue
        a,b=med[k]; print(f"   {k:55} {a*100:4.0f}% -> {b*100:4.0f}%  A{[round(x*100) for x in d[k]['A']]} B{[round(x*100) for x in d[k]['B']]}")

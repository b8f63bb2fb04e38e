import json,gzip,statistics,collections,sys
L=lambda f:{(r['from'],r['to'],r['dims'],r['dtype'],r['to_dtype']):r for r in json.load(gzip.open(f))['rows']}
A=L('sweep-before-1.json.gz'); A2=L('sweep-before-2.json.gz'); B=L('sweep-after.json.gz')
before=[l.split() for l in open('kernel-hashes-before.txt')]
after=[l.split() for l in open('kernel-hashes-after.txt')]
changed=set(' '.join(x[1:]) for x,y in zip(before,after) if x[0]!=y[0])
print('rows whose kernels changed:', len(changed))
def label(k):
    t=k[3] if k[3]==k[4] else k[3]+'>'+k[4]
    return f"{k[0]}->{k[1]} {t} {k[2]}"
cls=collections.defaultdict(list); rows=[]
for k in A:
    lab=label(k)
    if lab not in changed: continue
    a=statistics.median([A[k]['ratio_to_copy'],A2[k]['ratio_to_copy']]); b=B[k]['ratio_to_copy']
    big=A[k]['tensor_bytes']>=8<<20
    cls[(k[0], k[1], 'large' if big else 'small')].append(b/a)
    rows.append((b/a, A[k]['ratio_to_copy'],A2[k]['ratio_to_copy'],b,lab,'large' if big else 'small'))
for c,v in sorted(cls.items()):
    print('%-45s %3d rows: after/before median %.2f, min %.2f, max %.2f'%(' -> '.join(c[:2])+' '+c[2],len(v),statistics.median(v),min(v),max(v)))
rows.sort()
print('ten lowest after/before:')
for w in rows[:10]: print('  %.2f  before %.2f / %.2f, after %.2f  %s (%s)'%w)
print('ten highest:')
for w in rows[-10:]: print('  %.2f  before %.2f / %.2f, after %.2f  %s (%s)'%w)

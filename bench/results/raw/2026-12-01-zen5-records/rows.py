# The sweep rows of the 128-byte destination segment trial (rows-segment.txt) from a sweep JSON.
import json,sys
s=json.load(open('/tmp/sw/base-t1.json'))
for r in s['rows']:
    if r['size_class']!='>=8MiB' or r['from']!='NCHW' or r['to'] not in('NHWC','NCHW32c','kHWC8'): continue
    d=dict(x.split('=') for x in r['dims'].split(','))
    if int(d['C']) in (16,24,250,256,1000,2048) and int(d['H'])>=56:
        print(r['from'],r['to'],r['dims'],r['dtype'],r['to_dtype'])

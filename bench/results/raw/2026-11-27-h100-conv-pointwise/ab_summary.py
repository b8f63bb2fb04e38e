import json, sys, math, glob, statistics
d = sys.argv[1]
def load(v, b):
    runs = {}
    for f in sorted(glob.glob(f"{d}/{v}-b{b}-*.json")):
        for x in json.load(open(f))["results"]:
            if "tflops" in x:
                runs.setdefault(x["layer"], []).append((x["tflops"], x["kernel"]))
    return runs
for b in (1, 8, 32, 64):
    base = load("base", b)
    for v in ("r12", "r123"):
        c = load(v, b); rs = []
        for k in base:
            if k not in c: continue
            if base[k][0][1] != c[k][0][1]:
                a = statistics.median(t for t, _ in base[k]); z = statistics.median(t for t, _ in c[k])
                rs.append(z / a)
                print(f"b{b} {v} {k:30} {a:7.1f} -> {z:7.1f} {z/a:.2f}x  [{' '.join('%.1f'%t for t,_ in base[k])} | {' '.join('%.1f'%t for t,_ in c[k])}] {base[k][0][1]} -> {c[k][0][1]}")
        if rs: print(f"b{b} {v}: {len(rs)} changed, geomean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f}")

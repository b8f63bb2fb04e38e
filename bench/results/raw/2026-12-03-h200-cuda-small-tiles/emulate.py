#!/usr/bin/env python3
"""Runs a conversion's generated CUDA kernels on the CPU and compares the result with the
reference converter's, byte for byte. Each kernel source is compiled by g++ as C++ (one
std::thread per CUDA thread, a std::barrier for __syncthreads, `static` for __shared__, the
blocks of a launch one after another). Every cast: the f16 conversions' PTX (`cvt.rn.f16.f32`,
`cvt.f32.f16`) is replaced by g++'s `_Float16` conversions (round to nearest even), the NaN
cases staying the kernel's own integer code.

Usage: emulate.py DUMP_CONVERSION_BINARY CASES_FILE
CASES_FILE: one conversion a line, `FROM TO DIMS SRC_TYPE DST_TYPE [MULTIPROCESSORS]`."""
import os, subprocess, sys, tempfile

STORAGE = {1: 'unsigned char', 2: 'unsigned short', 4: 'unsigned int', 8: 'unsigned long long'}
PRELUDE = r'''
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
struct uint2 { unsigned int x, y; };
struct uint4 { unsigned int x, y, z, w; };
struct dim3 { unsigned int x, y, z; };
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim;
std::barrier<> *bar;
#define __syncthreads() bar->arrive_and_wait()
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
static inline float __uint_as_float(unsigned int v) { float f; memcpy(&f, &v, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int v; memcpy(&v, &f, 4); return v; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
using std::isnan;
static inline unsigned short f2h(float x) { _Float16 h = (_Float16)x; unsigned short b; memcpy(&b, &h, 2); return b; }
static inline float h2f(unsigned short v) { _Float16 h; memcpy(&h, &v, 2); return (float)h; }
'''
PTX = [
    ('asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));', 'h = f2h(x);'),
    ('asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));', 'f = h2f(v);'),
]


def run_case(dump, case, work):
    f, t, dims, st, dt, *sms = case.split()
    d = os.path.join(work, 'd')
    subprocess.run([dump, f, t, dims, st, dt, d, *sms], check=True)
    fill, ssize, dsize = map(int, open(f'{d}/meta.txt').read().split())
    s, dd = STORAGE[ssize], STORAGE[dsize]
    launches = [l.split() for l in open(f'{d}/launches.txt')]
    code = [PRELUDE]
    calls = []
    for name, grid, block, i in launches:
        src = open(f'{d}/k{i}.cu').read().replace('extern "C" ', '')
        for a, b in PTX:
            src = src.replace(a, b)
        code.append(f'namespace k{i} {{\n{src}\n}}\n')
        args = {'convert': f'(const {s}*)src, ({dd}*)dst', 'fill': f'({dd}*)dst, ({dd})fill'}.get(
            name, f'(const {s}*)src, ({dd}*)dst, ({dd})fill')
        calls.append((i, name, int(grid), int(block), args))
    code.append(r'''
int main(int argc, char **argv) {
  FILE *fs = fopen(argv[1], "rb"); std::vector<unsigned char> sv(atol(argv[3]) + 16), dv(atol(argv[4]) + 16, 0xA5);
  fread(sv.data(), 1, atol(argv[3]), fs); fclose(fs);
  unsigned long long fill = strtoull(argv[5], 0, 10);
  void *src = sv.data(), *dst = dv.data();
''')
    for i, name, grid, block, args in calls:
        code.append(f'''  {{
    blockDim = dim3{{{block}u, 1u, 1u}};
    std::barrier<> b({block}); bar = &b;
    std::vector<std::thread> ts;
    for (unsigned int t = 0; t < {block}u; ++t) ts.emplace_back([&, t] {{
      threadIdx = dim3{{t, 0u, 0u}};
      for (unsigned int g = 0; g < {grid}u; ++g) {{
        blockIdx = dim3{{g, 0u, 0u}};
        k{i}::{name}({args});
        bar->arrive_and_wait();
      }}
    }});
    for (auto &x : ts) x.join();
  }}
''')
    code.append(r'''  FILE *fo = fopen(argv[2], "wb"); fwrite(dv.data(), 1, atol(argv[4]), fo); fclose(fo);
  return 0;
}
''')
    cpp = os.path.join(work, 'emu.cpp')
    open(cpp, 'w').write(''.join(code))
    exe = os.path.join(work, 'emu')
    r = subprocess.run(['g++', '-std=c++20', '-O1', '-pthread', '-w', cpp, '-o', exe], capture_output=True, text=True)
    if r.returncode:
        return f'COMPILE ERROR\n{r.stderr[:3000]}'
    want = open(f'{d}/want.bin', 'rb').read()
    out = os.path.join(work, 'got.bin')
    subprocess.run([exe, f'{d}/src.bin', out, str(os.path.getsize(f'{d}/src.bin')), str(len(want)), str(fill)],
                   check=True)
    got = open(out, 'rb').read()
    if got == want:
        return f'ok ({len(launches)} launches: {" ".join(l[0] + ":" + l[1] for l in launches)})'
    first = next(i for i in range(len(want)) if got[i] != want[i])
    bad = sum(1 for i in range(len(want)) if got[i] != want[i])
    return f'MISMATCH at byte {first} ({bad} of {len(want)} bytes differ)'


def main():
    dump, cases = sys.argv[1:3]
    fails = 0
    with tempfile.TemporaryDirectory() as work:
        for case in open(cases):
            case = case.strip()
            if not case or case.startswith('#'):
                continue
            res = run_case(dump, case, work)
            fails += not res.startswith('ok')
            print(f'{case}: {res}', flush=True)
    print(f'{fails} failed')
    sys.exit(1 if fails else 0)


if __name__ == '__main__':
    main()

// One core's FMA peak: 12 independent accumulators (ymm with AVX2+FMA, zmm with AVX-512F),
// no loads, GFLOP/s = FMAs x lanes x 2 / time. Three passes.
// Build and run: gcc -O2 bench/probes/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
#define EACH(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)
__attribute__((target("avx2,fma"))) static double avx2(long n) {
#define D2(i) __m256 a##i = _mm256_set1_ps(i * 1e-3f);
  EACH(D2)
  __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-6f);
  double t = now();
  for (long k = 0; k < n; k++) {
#define F2(i) a##i = _mm256_fmadd_ps(a##i, b, c);
    EACH(F2)
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5),
                     "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
  }
  t = now() - t;
#define S2(i) a0 = _mm256_add_ps(a0, a##i);
  EACH(S2)
  float v[8];
  _mm256_storeu_ps(v, a0);
  if (v[0] == 12345.f) printf(" ");
  return n * 12.0 * 16 / t / 1e9;
}
__attribute__((target("avx512f"))) static double avx512(long n) {
#define D5(i) __m512 a##i = _mm512_set1_ps(i * 1e-3f);
  EACH(D5)
  __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-6f);
  double t = now();
  for (long k = 0; k < n; k++) {
#define F5(i) a##i = _mm512_fmadd_ps(a##i, b, c);
    EACH(F5)
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
                     "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
  }
  t = now() - t;
#define S5(i) a0 = _mm512_add_ps(a0, a##i);
  EACH(S5)
  float v[16];
  _mm512_storeu_ps(v, a0);
  if (v[0] == 12345.f) printf(" ");
  return n * 12.0 * 32 / t / 1e9;
}
int main(void) {
  for (int r = 0; r < 3; r++)
    printf("AVX2+FMA %.1f GFLOP/s   AVX-512 %.1f GFLOP/s\n", avx2(400000000), avx512(400000000));
  return 0;
}

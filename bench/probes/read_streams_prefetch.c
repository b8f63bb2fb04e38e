// Read bandwidth of one thread reading S sequential streams round robin, `burst` 64-byte lines
// per visit, with and without software prefetches: mode 0 none, mode 1 the same stream `dist`
// bytes ahead, mode 2 the next visit's lines (the next stream). A 256 MiB buffer cut in S
// parts. Companion of read_streams.c (which has no prefetch modes).
// Build and run: gcc -O2 -march=native bench/probes/read_streams_prefetch.c -o /tmp/rsp && /tmp/rsp
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
__attribute__((target("avx2"))) static double run(const char *buf, size_t bytes, int S, int burst, int mode, int dist) {
  size_t per = (bytes / S / 4096 - 3) * 4096 + 64 * 13;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  double t = now();
  for (size_t off = 0; off + 64 * burst <= per; off += 64 * burst)
    for (int s = 0; s < S; s++) {
      const char *p = buf + s * per + off;
      const char *q = s + 1 < S ? buf + (s + 1) * per + off : buf + off + 64 * burst;
      for (int b = 0; b < burst; b++) {
        if (mode == 1) _mm_prefetch(p + 64 * b + dist, _MM_HINT_T0);
        if (mode == 2) _mm_prefetch(q + 64 * b + dist, _MM_HINT_T0);
        const float *f = (const float *)(p + 64 * b);
        if (b & 1) {
          a0 = _mm256_add_ps(a0, _mm256_load_ps(f));
          a1 = _mm256_add_ps(a1, _mm256_load_ps(f + 8));
        } else {
          a2 = _mm256_add_ps(a2, _mm256_load_ps(f));
          a3 = _mm256_add_ps(a3, _mm256_load_ps(f + 8));
        }
      }
    }
  t = now() - t;
  float v[8];
  _mm256_storeu_ps(v, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  if (v[0] == 1.2345f) printf(" ");
  return (double)(per / (64 * burst)) * 64 * burst * S / t / 1e9;
}
int main(void) {
  size_t bytes = (size_t)256 << 20;
  char *buf = aligned_alloc(4096, bytes);
  for (size_t i = 0; i < bytes; i += 64) buf[i] = (char)i;
  int st[] = {1, 4, 6, 8, 16, 64};
  int bu[] = {4, 16, 64};
  struct { int m, d; } modes[] = {{0, 0}, {1, 512}, {1, 2048}, {1, 8192}, {2, 0}};
  printf("GB/s read (best of 3); columns: streams 1 4 6 8 16 64\n");
  for (int mi = 0; mi < 5; mi++) {
    printf("mode %d dist %d\n", modes[mi].m, modes[mi].d);
    for (int b = 0; b < 3; b++) {
      printf("%3d lines", bu[b]);
      for (int i = 0; i < 6; i++) {
        double best = 0;
        for (int r = 0; r < 3; r++) {
          double g = run(buf, bytes, st[i], bu[b], modes[mi].m, modes[mi].d);
          if (g > best) best = g;
        }
        printf(" %6.1f", best);
      }
      printf("\n");
    }
  }
  return 0;
}

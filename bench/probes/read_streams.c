// Read bandwidth of one thread against the number of sequential streams it reads at once:
// S streams (a 64 MiB buffer cut in S parts, each part's start moved off a power of two),
// visited round robin, `burst` 64-byte lines per visit. A transposing conversion reads as
// many streams as its tile has source rows; a copy reads one.
// Build and run: gcc -O2 bench/probes/read_streams.c -o /tmp/read_streams && /tmp/read_streams
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
__attribute__((target("avx2"))) static double run(const char *buf, size_t bytes, int S, int burst) {
  size_t per = (bytes / S / 4096 - 3) * 4096 + 64 * 13;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  double t = now();
  for (size_t off = 0; off + 64 * burst <= per; off += 64 * burst)
    for (int s = 0; s < S; s++) {
      const float *p = (const float *)(buf + s * per + off);
      for (int b = 0; b < burst; b++) {
        acc0 = _mm256_add_ps(acc0, _mm256_load_ps(p + 16 * b));
        acc1 = _mm256_add_ps(acc1, _mm256_load_ps(p + 16 * b + 8));
      }
    }
  t = now() - t;
  float v[8];
  _mm256_storeu_ps(v, _mm256_add_ps(acc0, acc1));
  if (v[0] == 1.2345f) printf(" ");
  return (double)(per / (64 * burst)) * 64 * burst * S / t / 1e9;
}
int main(void) {
  size_t bytes = (size_t)64 << 20;
  char *buf = aligned_alloc(4096, bytes);
  for (size_t i = 0; i < bytes; i++) buf[i] = (char)i;
  int streams[] = {1, 2, 4, 6, 8, 12, 16, 32, 64};
  int bursts[] = {1, 4, 16, 64};
  printf("GB/s read (best of 3)\nburst \\ streams");
  for (int i = 0; i < 9; i++) printf(" %6d", streams[i]);
  printf("\n");
  for (int b = 0; b < 4; b++) {
    printf("%5d lines     ", bursts[b]);
    for (int i = 0; i < 9; i++) {
      double best = 0;
      for (int r = 0; r < 3; r++) {
        double g = run(buf, bytes, streams[i], bursts[b]);
        if (g > best) best = g;
      }
      printf(" %6.1f", best);
    }
    printf("\n");
  }
  return 0;
}

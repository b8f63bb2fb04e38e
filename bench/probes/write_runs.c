// What an NCHW -> NHWC transposition of f32, C = 256, 64 x 64 planes, 8 images (32 MiB) asks of
// the memory, one side at a time, one thread: the destination written in runs of L lines per
// pixel (L = 1: a tile of 16 channels writes one 64-byte line into each 1 KiB pixel, then the
// next pixel's), with non-temporal 32-byte, non-temporal 64-byte or plain stores; the source
// read 8 channel rows at a time, 32 bytes from each, bands of 16..256 channels; and both
// sequentially.
// Build and run: gcc -O2 -mavx2 -mavx512f bench/probes/write_runs.c -o /tmp/write_runs && /tmp/write_runs
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define N 8
#define C 256
#define HW 4096
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
enum { READ_BANDS, NT32, NT64, PLAIN, SEQ_NT, SEQ_READ };
static double run(const float *src, float *dst, int mode, int band) {
  __m256 acc = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  double t = now();
  if (mode == SEQ_NT) {
    for (size_t i = 0; i < (size_t)N * C * HW; i += 8) _mm256_stream_ps(dst + i, one);
  } else if (mode == SEQ_READ) {
    for (size_t i = 0; i < (size_t)N * C * HW; i += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(src + i));
  } else {
    for (int n = 0; n < N; n++) {
      const float *s = src + (size_t)n * C * HW;
      float *d = dst + (size_t)n * C * HW;
      for (int c0 = 0; c0 < C; c0 += band)
        for (int p = 0; p < HW; p += 8)
          for (int cb = c0; cb < c0 + band; cb += 8)
            for (int k = 0; k < 8; k++) {
              float *o = d + (size_t)(p + k) * C + cb;
              if (mode == READ_BANDS) {
                const float *q = s + (size_t)(cb + k) * HW + p;
                _mm_prefetch((const char *)(q + 128), _MM_HINT_T0);
                acc = _mm256_add_ps(acc, _mm256_load_ps(q));
              } else if (mode == NT32) {
                _mm256_stream_ps(o, one);
              } else if (mode == NT64) {
                if ((cb & 15) == 0) _mm512_stream_ps(o, _mm512_set1_ps(1.f));
              } else {
                _mm256_store_ps(o, one);
              }
            }
    }
  }
  _mm_sfence();
  t = now() - t;
  float v[8];
  _mm256_storeu_ps(v, acc);
  if (v[0] == 1.5f) printf(" ");
  return (double)N * C * HW * 4 / t / 1e9;
}
int main(void) {
  size_t el = (size_t)N * C * HW;
  float *a = aligned_alloc(64, el * 4), *b = aligned_alloc(64, el * 4);
  for (size_t i = 0; i < el; i++) a[i] = i;
  memset(b, 0, el * 4);
  const char *names[] = {"source: 8-row blocks", "dest: NT 32-byte", "dest: NT 64-byte",
                         "dest: plain stores", "dest: sequential NT", "source: sequential"};
  printf("GB/s one way (best of 5); band = channels per pass (lines per pixel run = band / 16)\n");
  for (int mode = 0; mode < 6; mode++)
    for (int band = 16; band <= 256; band *= 2) {
      if (mode >= SEQ_NT && band > 16) break;
      double best = 0;
      for (int r = 0; r < 5; r++) {
        double g = run(a, b, mode, band);
        if (g > best) best = g;
      }
      if (mode >= SEQ_NT) printf("%-22s          %6.1f\n", names[mode], best);
      else printf("%-22s band %3d %6.1f\n", names[mode], band, best);
    }
  return 0;
}

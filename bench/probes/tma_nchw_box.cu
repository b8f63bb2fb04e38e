// Where a TMA tiled copy of a box of an NCHW tensor (16-bit elements) lands in shared memory,
// and which boxes the copy engine takes: a box starting off a 16-byte boundary along W, a
// row narrower than the 128-byte swizzle, negative coordinates, element strides.
//
// Run on a Hopper GPU (one case per process, since a faulting copy ends the context):
//   nvcc -arch=sm_90a -std=c++17 tma_nchw_box.cu -lcuda -o probe
//   for c in A B C D E F G H I J K L M P; do ./probe $c; done
// Each case prints the first 2 KiB of shared memory (cCC hHH wWW: the element's channel, row
// and column; "zero": a zero fill; "---": not written) and whether every element sits where
// "packed densely in box order, then each 16-byte chunk XORed with (offset / 128) % 8" puts it.
// Results (H100): bench/results/raw/2026-11-26-h100-tma-nchw-probe/.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cstring>

struct __align__(64) TMap { unsigned long long v[16]; };

__device__ unsigned saddr(const void* p) {
  unsigned a; asm volatile("{ .reg .u64 q; cvta.to.shared.u64 q, %1; cvt.u32.u64 %0, q; }" : "=r"(a) : "l"(p)); return a;
}

extern "C" __global__ void probe(const __grid_constant__ TMap m, int swz, int c0, int c1, int c2, int c3, unsigned bytes, unsigned short* out) {
  extern __shared__ __align__(1024) unsigned short s[];
  __shared__ __align__(8) unsigned long long bar;
  for (int i = threadIdx.x; i < 65536; i += blockDim.x) s[i] = 0xEEEE;
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(saddr(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(saddr(&bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
      :: "r"(saddr(s)), "l"((unsigned long long)&m), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(saddr(&bar)) : "memory");
    unsigned done = 0; long long spins = 0;
    while (!done && ++spins < 20000000) asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(saddr(&bar)) : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 8192; i += blockDim.x) out[i] = s[i];
}

static unsigned short val(int c, int h, int w) { return (c < 0 || c >= 64 || h < 0 || h >= 16 || w < 0 || w >= 32) ? 0 : (unsigned short)(1 + c * 512 + h * 32 + w); }
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* e; cuGetErrorString(r, &e); printf("%s -> %s\n", #x, e); } } while (0)

int main(int argc, char** argv) {
  const char which = argc > 1 ? argv[1][0] : 'A';
  cudaFree(0); CK(cuInit(0));
  const int N = 1, C = 64, H = 16, W = 32;
  // element (n, c, h, w) holds 1 + c * 512 + h * 32 + w (W = 32): 0 marks a zero fill
  std::vector<unsigned short> host(N * C * H * W);
  for (int c = 0; c < C; ++c) for (int h = 0; h < H; ++h) for (int w = 0; w < W; ++w) host[(c * H + h) * W + w] = 1 + c * 512 + h * 32 + w;
  void* x; void* out; cudaMalloc(&x, host.size() * 2); cudaMemcpy(x, host.data(), host.size() * 2, cudaMemcpyHostToDevice); cudaMalloc(&out, 65536);
  auto run = [&](const char* name, cuuint64_t* dims, cuuint64_t* strides, cuuint32_t* box, cuuint32_t* es, CUtensorMapSwizzle sw, int* co, unsigned bytes, auto expect) {
    TMap m; memset(&m, 0, sizeof m);
    CUresult r = cuTensorMapEncodeTiled((CUtensorMap*)&m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, x, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { const char* e; cuGetErrorString(r, &e); printf("%s: encode failed: %s\n", name, e); return; }
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 131072);
    probe<<<1, 256, 131072>>>(m, (int)sw, co[0], co[1], co[2], co[3], bytes, (unsigned short*)out);
    cudaError_t s = cudaDeviceSynchronize(); if (s != cudaSuccess) { printf("%s: kernel failed: %s\n", name, cudaGetErrorString(s)); exit(1); }
    std::vector<unsigned short> o(8192); cudaMemcpy(o.data(), out, 16384, cudaMemcpyDeviceToHost);
    printf("== %s (coords %d %d %d %d, %u bytes)\n", name, co[0], co[1], co[2], co[3], bytes);
    for (int i = 0; i < 1024 && i < (int)(bytes / 2) + 64; ++i) {
      unsigned short v = o[i];
      if (i % 8 == 0) printf("%5d:", i * 2);
      if (v == 0xEEEE) printf("  ---------");
      else if (v == 0) printf("  zero     ");
      else { int e = v - 1; printf("  c%02dh%02dw%02d", e / 512, (e / 32) % 16, e % 32); }
      if (i % 8 == 7) printf("\n");
    }
    // hypothesis: the loaded elements packed densely in box order, then (with the 128-byte
    // swizzle) each 16-byte chunk moved to chunk ^ ((offset / 128) % 8)
    int bad = 0, first = -1;
    for (int d = 0; d < (int)(bytes / 2); ++d) {
      int o8 = d * 2;
      if (sw == CU_TENSOR_MAP_SWIZZLE_128B) o8 = o8 ^ (((o8 >> 7) & 7) << 4);
      unsigned short want = expect(d);
      if (o[o8 / 2] != want) { if (first < 0) first = d; ++bad; }
    }
    printf("\n%s: dense-then-address-swizzle hypothesis: %d of %u elements differ (first at dense index %d)\n\n", name, bad, bytes / 2, first);
  };
  cuuint64_t dims[4] = {W, H, C, N}, strides[3] = {W * 2, W * H * 2, (cuuint64_t)W * H * C * 2};
  cuuint32_t es1[4] = {1, 1, 1, 1};
  if (which == 'A') { cuuint32_t box[4] = {8, 8, 64, 1}; int co[4] = {-1, 2, 0, 0}; run("A: box 8x8x64, swizzle 128B", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 2 + (d / 8) % 8, -1 + d % 8); }); }
  if (which == 'B') { cuuint32_t box[4] = {16, 4, 64, 1}; int co[4] = {3, 1, 0, 0}; run("B: box 16x4x64, swizzle 128B", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 1 + (d / 16) % 4, 3 + d % 16); }); }
  if (which == 'C') { cuuint32_t box[4] = {8, 8, 64, 1}; int co[4] = {-1, 2, 0, 0}; run("C: box 8x8x64, no swizzle", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_NONE, co, 8192, [&](int d) { return val(d / 64, 2 + (d / 8) % 8, -1 + d % 8); }); }
  if (which == 'D') { cuuint32_t box[4] = {16, 16, 64, 1}; cuuint32_t es[4] = {2, 2, 1, 1}; int co[4] = {-1, -1, 0, 0}; run("D: box 16x16x64 strides 2,2, swizzle 128B", dims, strides, box, es, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, -1 + 2 * ((d / 8) % 8), -1 + 2 * (d % 8)); }); }
  if (which == 'E') { cuuint64_t d2[4] = {W, C, H, N}, s2[3] = {W * H * 2, W * 2, (cuuint64_t)W * H * C * 2}; cuuint32_t box[4] = {8, 64, 8, 1}; int co[4] = {-1, 0, 2, 0}; run("E: dims W,C,H,N (strides not increasing), box 8x64x8, no swizzle", d2, s2, box, es1, CU_TENSOR_MAP_SWIZZLE_NONE, co, 8192, [&](int d) { return val((d / 8) % 64, 2 + d / 512, -1 + d % 8); }); }
  if (which == 'F') { cuuint32_t box[4] = {32, 2, 64, 1}; int co[4] = {-1, 15, 0, 0}; run("F: box 32x2x64, swizzle 128B, rows past H", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 15 + (d / 32) % 2, -1 + d % 32); }); }
  if (which == 'G') { cuuint32_t box[4] = {32, 2, 64, 1}; int co[4] = {0, 4, 0, 0}; run("G: box 32x2x64 at 0, swizzle 128B (control)", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 4 + (d / 32) % 2, d % 32); }); }
  if (which == 'H') { cuuint32_t box[4] = {32, 2, 64, 1}; int co[4] = {-1, 4, 0, 0}; run("H: box 32x2x64 swizzle 128B at w -1", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 4 + (d / 32) % 2, -1 + d % 32); }); }
  if (which == 'I') { cuuint32_t box[4] = {32, 2, 64, 1}; int co[4] = {3, 4, 0, 0}; run("I: box 32x2x64 swizzle 128B at w 3", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 4 + (d / 32) % 2, 3 + d % 32); }); }
  if (which == 'J') { cuuint32_t box[4] = {32, 2, 64, 1}; int co[4] = {8, 4, 0, 0}; run("J: box 32x2x64 swizzle 128B at w 8", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 4 + (d / 32) % 2, 8 + d % 32); }); }
  if (which == 'K') { cuuint32_t box[4] = {32, 2, 64, 1}; int co[4] = {-8, -1, 0, 0}; run("K: box 32x2x64 swizzle 128B at w -8 h -1", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, -1 + (d / 32) % 2, -8 + d % 32); }); }
  if (which == 'L') { cuuint32_t box[4] = {8, 8, 64, 1}; int co[4] = {0, 2, 0, 0}; run("L: box 8x8x64 no swizzle at 0", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_NONE, co, 8192, [&](int d) { return val(d / 64, 2 + (d / 8) % 8, d % 8); }); }
  if (which == 'M') { cuuint32_t box[4] = {8, 8, 64, 1}; int co[4] = {1, 2, 0, 0}; run("M: box 8x8x64 no swizzle at w 1", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_NONE, co, 8192, [&](int d) { return val(d / 64, 2 + (d / 8) % 8, 1 + d % 8); }); }
  if (which == 'P') { cuuint32_t box[4] = {64, 1, 64, 1}; int co[4] = {-1, 2, 0, 0}; run("P: box 64x1x64 swizzle 128B at w -1 (W=32: half out)", dims, strides, box, es1, CU_TENSOR_MAP_SWIZZLE_128B, co, 8192, [&](int d) { return val(d / 64, 2, -1 + d % 64); }); }
  return 0;
}

// Transposing f32 tiles held in L2, one thread: a 256 x 64 source (64 KiB) into a 64 x 256
// destination, repeated, with the AVX2 8 x 8 blocks the engine's 4-byte kernels use and with
// AVX-512 16 x 16 blocks (unpack, shuffle, then two rounds of 128-bit lane shuffles), GB/s of
// bytes read and written. A copy of a tensor under 1 MiB runs from L2 at 200-270 GB/s on
// the same machine (the sweep's small rows), the yardstick of the sweep's "< 1 MiB" goal.
// Build and run: gcc -O2 -mavx2 -mavx512f bench/probes/transpose_l2.c -o /tmp/transpose_l2 && /tmp/transpose_l2
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline void tr8(__m256 r[8]){
  __m256 t0=_mm256_unpacklo_ps(r[0],r[1]),t1=_mm256_unpackhi_ps(r[0],r[1]),t2=_mm256_unpacklo_ps(r[2],r[3]),t3=_mm256_unpackhi_ps(r[2],r[3]);
  __m256 t4=_mm256_unpacklo_ps(r[4],r[5]),t5=_mm256_unpackhi_ps(r[4],r[5]),t6=_mm256_unpacklo_ps(r[6],r[7]),t7=_mm256_unpackhi_ps(r[6],r[7]);
  __m256 u0=_mm256_shuffle_ps(t0,t2,0x44),u1=_mm256_shuffle_ps(t0,t2,0xEE),u2=_mm256_shuffle_ps(t1,t3,0x44),u3=_mm256_shuffle_ps(t1,t3,0xEE);
  __m256 u4=_mm256_shuffle_ps(t4,t6,0x44),u5=_mm256_shuffle_ps(t4,t6,0xEE),u6=_mm256_shuffle_ps(t5,t7,0x44),u7=_mm256_shuffle_ps(t5,t7,0xEE);
  r[0]=_mm256_permute2f128_ps(u0,u4,0x20);r[1]=_mm256_permute2f128_ps(u1,u5,0x20);r[2]=_mm256_permute2f128_ps(u2,u6,0x20);r[3]=_mm256_permute2f128_ps(u3,u7,0x20);
  r[4]=_mm256_permute2f128_ps(u0,u4,0x31);r[5]=_mm256_permute2f128_ps(u1,u5,0x31);r[6]=_mm256_permute2f128_ps(u2,u6,0x31);r[7]=_mm256_permute2f128_ps(u3,u7,0x31);
}
static inline void tr16(__m512 r[16]){
  __m512 t[16],u[16];
  for(int i=0;i<8;i++){t[2*i]=_mm512_unpacklo_ps(r[2*i],r[2*i+1]);t[2*i+1]=_mm512_unpackhi_ps(r[2*i],r[2*i+1]);}
  for(int g=0;g<4;g++){
    u[4*g]=_mm512_shuffle_ps(t[4*g],t[4*g+2],0x44); u[4*g+1]=_mm512_shuffle_ps(t[4*g],t[4*g+2],0xEE);
    u[4*g+2]=_mm512_shuffle_ps(t[4*g+1],t[4*g+3],0x44); u[4*g+3]=_mm512_shuffle_ps(t[4*g+1],t[4*g+3],0xEE);}
  // now u[4g+c]: rows 4g..4g+3, column c of each 128-bit lane (lane L = columns 4L..4L+3)
  for(int c=0;c<4;c++){
    __m512 a=_mm512_shuffle_f32x4(u[c],u[4+c],0x88), b=_mm512_shuffle_f32x4(u[c],u[4+c],0xDD);
    __m512 d=_mm512_shuffle_f32x4(u[8+c],u[12+c],0x88), e=_mm512_shuffle_f32x4(u[8+c],u[12+c],0xDD);
    r[c]=_mm512_shuffle_f32x4(a,d,0x88); r[8+c]=_mm512_shuffle_f32x4(a,d,0xDD);
    r[4+c]=_mm512_shuffle_f32x4(b,e,0x88); r[12+c]=_mm512_shuffle_f32x4(b,e,0xDD);
  }
}
#define NA 64
#define NB 256
int main(){
  float*s=aligned_alloc(64,NA*NB*4),*d=aligned_alloc(64,NA*NB*4),*d2=aligned_alloc(64,NA*NB*4);
  for(int i=0;i<NA*NB;i++)s[i]=i;
  // src: NB rows of NA; dst: NA rows of NB
  int reps=20000; double best8=1e9,best16=1e9;
  for(int round=0;round<5;round++){
    double t=now();
    for(int r=0;r<reps;r++) for(int a=0;a<NA;a+=8) for(int b=0;b<NB;b+=8){__m256 v[8];for(int k=0;k<8;k++)v[k]=_mm256_load_ps(s+(b+k)*NA+a);tr8(v);for(int k=0;k<8;k++)_mm256_store_ps(d+(a+k)*NB+b,v[k]);}
    t=now()-t; if(t<best8)best8=t;
    t=now();
    for(int r=0;r<reps;r++) for(int a=0;a<NA;a+=16) for(int b=0;b<NB;b+=16){__m512 v[16];for(int k=0;k<16;k++)v[k]=_mm512_load_ps(s+(b+k)*NA+a);tr16(v);for(int k=0;k<16;k++)_mm512_store_ps(d2+(a+k)*NB+b,v[k]);}
    t=now()-t; if(t<best16)best16=t;
  }
  int ok=1; for(int a=0;a<NA;a++)for(int b=0;b<NB;b++){ if(d[a*NB+b]!=s[b*NA+a]||d2[a*NB+b]!=s[b*NA+a]) ok=0;}
  double bytes=2.0*NA*NB*4*reps;
  printf("8x8 AVX2: %.1f GB/s   16x16 AVX-512: %.1f GB/s  %s\n",bytes/best8/1e9,bytes/best16/1e9, ok?"ok":"WRONG");
}

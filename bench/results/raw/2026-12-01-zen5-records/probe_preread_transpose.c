// f32 NCHW -> NHWC: (1) read a chunk of all C channels x K pixels in source order (few streams),
// then (2) transpose it from the caches into the destination with NT stores (pixels whole).
// Modes: 0 none, 1 a pass of loads over the chunk first, 2 a pass of prefetches (T1), 3 loads of two rows at a time.
// Build and run: gcc -O2 -mavx2 -mfma probe_preread_transpose.c -o /tmp/p && taskset -c 0 /tmp/p 256 4096
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline void tr8(__m256 r[8]){
  __m256 t0=_mm256_unpacklo_ps(r[0],r[1]),t1=_mm256_unpackhi_ps(r[0],r[1]),t2=_mm256_unpacklo_ps(r[2],r[3]),t3=_mm256_unpackhi_ps(r[2],r[3]);
  __m256 t4=_mm256_unpacklo_ps(r[4],r[5]),t5=_mm256_unpackhi_ps(r[4],r[5]),t6=_mm256_unpacklo_ps(r[6],r[7]),t7=_mm256_unpackhi_ps(r[6],r[7]);
  __m256 s0=_mm256_shuffle_ps(t0,t2,0x44),s1=_mm256_shuffle_ps(t0,t2,0xEE),s2=_mm256_shuffle_ps(t1,t3,0x44),s3=_mm256_shuffle_ps(t1,t3,0xEE);
  __m256 s4=_mm256_shuffle_ps(t4,t6,0x44),s5=_mm256_shuffle_ps(t4,t6,0xEE),s6=_mm256_shuffle_ps(t5,t7,0x44),s7=_mm256_shuffle_ps(t5,t7,0xEE);
  r[0]=_mm256_permute2f128_ps(s0,s4,0x20);r[1]=_mm256_permute2f128_ps(s1,s5,0x20);r[2]=_mm256_permute2f128_ps(s2,s6,0x20);r[3]=_mm256_permute2f128_ps(s3,s7,0x20);
  r[4]=_mm256_permute2f128_ps(s0,s4,0x31);r[5]=_mm256_permute2f128_ps(s1,s5,0x31);r[6]=_mm256_permute2f128_ps(s2,s6,0x31);r[7]=_mm256_permute2f128_ps(s3,s7,0x31);
}
static volatile float sink;
__attribute__((target("avx2,fma"))) static void conv(const float*src,float*dst,int N,int C,int HW,int K,int mode,int CB){
  __m256 acc=_mm256_setzero_ps();
  for(int n=0;n<N;n++){const float*s=src+(size_t)n*C*HW;float*d=dst+(size_t)n*C*HW;
    for(int p0=0;p0<HW;p0+=K){
      if(mode==1) for(int c=0;c<C;c++) for(int p=p0;p<p0+K;p+=16) acc=_mm256_add_ps(acc,_mm256_load_ps(s+(size_t)c*HW+p));
      if(mode==2) for(int c=0;c<C;c++) for(int p=p0;p<p0+K;p+=16) _mm_prefetch((const char*)(s+(size_t)c*HW+p),_MM_HINT_T1);
      if(mode==3) for(int c=0;c<C;c+=2) for(int p=p0;p<p0+K;p+=16) {acc=_mm256_add_ps(acc,_mm256_load_ps(s+(size_t)c*HW+p));acc=_mm256_add_ps(acc,_mm256_load_ps(s+(size_t)(c+1)*HW+p));}
      for(int c0=0;c0<C;c0+=CB)
      for(int p=p0;p<p0+K;p+=8) for(int c=c0;c<c0+CB;c+=8){
        __m256 a[8];
        for(int i=0;i<8;i++) a[i]=_mm256_load_ps(s+(size_t)(c+i)*HW+p);
        tr8(a);
        for(int i=0;i<8;i++) _mm256_stream_ps(d+(size_t)(p+i)*C+c,a[i]);
      }
    }}
  float v[8];_mm256_storeu_ps(v,acc);sink=v[0];
}
int main(int argc,char**argv){
  int C=256,HW=64*64; if(argc>2){C=atoi(argv[1]);HW=atoi(argv[2]);} int N=(8<<20)/(C*HW); if(N<1)N=1; size_t n=(size_t)N*C*HW;
  float*src=aligned_alloc(1<<21,n*4),*dst=aligned_alloc(1<<21,n*4);
  for(size_t i=0;i<n;i++)src[i]=i;memset(dst,0,n*4);
  printf("N=%d C=%d HW=%d\n",N,C,HW);
  for(int rep=0;rep<2;rep++){
    double t=now();memcpy(dst,src,n*4);t=now()-t;printf("copy %.1f GB/s\n",2*n*4/t/1e9);
    int Ks[]={64,256,1024,4096};
    for(int mode=0;mode<4;mode++) for(int ki=0;ki<4;ki++){int K=Ks[ki]; if(K>HW) continue;
      for(int CB=16;CB<=C;CB*=4){
      double best=0; for(int r=0;r<3;r++){t=now();conv(src,dst,N,C,HW,K,mode,CB);t=now()-t; if(2*n*4/t/1e9>best)best=2*n*4/t/1e9;}
      printf("mode %d K=%4d CB=%3d %.1f\n",mode,K,CB,best);}
    }
  }
  conv(src,dst,N,C,HW,1024,1,C);
  for(int i=0;i<N;i++)for(int c=0;c<C;c++)for(int p=0;p<HW;p+=37) if(dst[(size_t)i*C*HW+(size_t)p*C+c]!=src[(size_t)i*C*HW+(size_t)c*HW+p]){printf("BAD\n");return 1;}
  printf("ok\n");
}

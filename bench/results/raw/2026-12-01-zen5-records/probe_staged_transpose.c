// f32 NCHW -> NHWC through an L2 staging tile: read KR channel rows at a time (few streams),
// copy them into the stage, then transpose the stage into the destination with NT stores.
// PH (phase mask) cycles 1 (the reads into the stage only), 2 (the stage out only), 3 (both).
// Build and run: gcc -O2 -mavx2 -mfma probe_staged_transpose.c -o /tmp/p && taskset -c 0 /tmp/p
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
// stage: CB rows of P floats (row stride P). dst: pixel p, channel c0.. at dst + p*C + c0.
__attribute__((target("avx2,fma"))) static void out(const float*st,int CB,int P,float*dst,int C,int nt){
  for(int p=0;p<P;p+=8) for(int c=0;c<CB;c+=16){
    __m256 a[8],b[8];
    for(int i=0;i<8;i++){a[i]=_mm256_load_ps(st+(size_t)(c+i)*P+p);b[i]=_mm256_load_ps(st+(size_t)(c+8+i)*P+p);}
    tr8(a);tr8(b);
    for(int i=0;i<8;i++){float*d=dst+(size_t)(p+i)*C+c; if(nt){_mm256_stream_ps(d,a[i]);_mm256_stream_ps(d+8,b[i]);} else {_mm256_store_ps(d,a[i]);_mm256_store_ps(d+8,b[i]);}}
  }
}
__attribute__((target("avx2,fma"))) static void direct(const float*src,float*dst,int N,int C,int HW){
  // the current-engine-like shape: 16 channel rows x 8 pixels blocks, NT stores.
  for(int n=0;n<N;n++){const float*s=src+(size_t)n*C*HW;float*d=dst+(size_t)n*C*HW;
    for(int c=0;c<C;c+=16) for(int p=0;p<HW;p+=8){
      __m256 a[8],b[8];
      for(int i=0;i<8;i++){a[i]=_mm256_loadu_ps(s+(size_t)(c+i)*HW+p);b[i]=_mm256_loadu_ps(s+(size_t)(c+8+i)*HW+p);}
      tr8(a);tr8(b);
      for(int i=0;i<8;i++){float*q=d+(size_t)(p+i)*C+c;_mm256_stream_ps(q,a[i]);_mm256_stream_ps(q+8,b[i]);}
    }}
}
static int PH=3;
static void staged(const float*src,float*dst,int N,int C,int HW,float*st,int CB,int P,int KR,int nt){
  for(int n=0;n<N;n++){const float*s=src+(size_t)n*C*HW;float*d=dst+(size_t)n*C*HW;
    for(int p0=0;p0<HW;p0+=P){int pl=HW-p0<P?HW-p0:P;
      for(int c0=0;c0<C;c0+=CB){
        if(PH&1) for(int c=0;c<CB;c+=KR){ // KR rows at a time, interleaved line by line
          for(int off=0;off<pl;off+=16) for(int k=0;k<KR;k++) memcpy(st+(size_t)(c+k)*P+off,s+(size_t)(c0+c+k)*HW+p0+off,64);
        }
        if(PH&2) out(st,CB,P,d+(size_t)p0*C+c0,C,nt);
      }}}
}
int main(int argc,char**argv){
  int N=8,C=256,HW=64*64; size_t n=(size_t)N*C*HW;
  float*src=aligned_alloc(1<<21,n*4),*dst=aligned_alloc(1<<21,n*4),*st=aligned_alloc(64,1<<20);
  for(size_t i=0;i<n;i++)src[i]=i;memset(dst,0,n*4);
  for(int rep=0;rep<6;rep++){ PH=rep%3+1; printf("phase mask %d\n",PH);
  double t=now();memcpy(dst,src,n*4);t=now()-t;printf("copy %.1f GB/s\n",2*n*4/t/1e9);
  t=now();direct(src,dst,N,C,HW);t=now()-t;printf("direct16x8 %.1f\n",2*n*4/t/1e9);
  int cfg[][4]={{64,1024,4,1},{64,512,4,1},{256,256,4,1},{128,512,4,1},{64,1024,2,1},{64,1024,6,1},{64,2048,4,1},{32,2048,4,1},{64,1024,4,0}};
  for(int i=0;i<9;i++){int CB=cfg[i][0],P=cfg[i][1],KR=cfg[i][2],nt=cfg[i][3];
    t=now();staged(src,dst,N,C,HW,st,CB,P,KR,nt);t=now()-t;printf("staged CB=%d P=%d KR=%d nt=%d %.1f\n",CB,P,KR,nt,2*n*4/t/1e9);}
  }
  // verify
  staged(src,dst,N,C,HW,st,64,1024,4,1);
  for(int i=0;i<N;i++)for(int c=0;c<C;c++)for(int p=0;p<HW;p+=37) if(dst[(size_t)i*C*HW+(size_t)p*C+c]!=src[(size_t)i*C*HW+(size_t)c*HW+p]){printf("BAD\n");return 1;}
  printf("ok\n");
}

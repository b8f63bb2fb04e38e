// NHWC -> NCHW f32 for small planes (7 x 7 to 14 x 14) through an L2 stage: per image, blocks of
// CQ channels (a stage of CQ x H*W floats, the block's destination range), filled by sub-tiles
// of G pixels (G source rows, each CQ channels) with AVX2 8 x 8 transposes, then streamed out
// with non-temporal stores. NOSTREAM=1 leaves out the streaming (the fill alone), NOTRANS=1 the
// fill (the streaming alone; both then print WRONG: the output is not written); ratio =
// memcpy's time over this one (same bytes).
// Build and run: gcc -O2 -march=native bench/probes/staged_small_planes.c -o /tmp/ssp &&
//   /tmp/ssp 21 2048 14     (N, C, H = W)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
// 8x8: src rows (pixels) stride ss floats, 8 channels each -> dst rows (channels) stride ds floats, 8 pixels each
__attribute__((target("avx2"))) static inline void t8(const float*s,size_t ss,float*d,size_t ds){
  __m256 r0=_mm256_loadu_ps(s),r1=_mm256_loadu_ps(s+ss),r2=_mm256_loadu_ps(s+2*ss),r3=_mm256_loadu_ps(s+3*ss),r4=_mm256_loadu_ps(s+4*ss),r5=_mm256_loadu_ps(s+5*ss),r6=_mm256_loadu_ps(s+6*ss),r7=_mm256_loadu_ps(s+7*ss);
  __m256 t0=_mm256_unpacklo_ps(r0,r1),t1=_mm256_unpackhi_ps(r0,r1),t2=_mm256_unpacklo_ps(r2,r3),t3=_mm256_unpackhi_ps(r2,r3),t4=_mm256_unpacklo_ps(r4,r5),t5=_mm256_unpackhi_ps(r4,r5),t6=_mm256_unpacklo_ps(r6,r7),t7=_mm256_unpackhi_ps(r6,r7);
  __m256 u0=_mm256_shuffle_ps(t0,t2,0x44),u1=_mm256_shuffle_ps(t0,t2,0xEE),u2=_mm256_shuffle_ps(t1,t3,0x44),u3=_mm256_shuffle_ps(t1,t3,0xEE),u4=_mm256_shuffle_ps(t4,t6,0x44),u5=_mm256_shuffle_ps(t4,t6,0xEE),u6=_mm256_shuffle_ps(t5,t7,0x44),u7=_mm256_shuffle_ps(t5,t7,0xEE);
  _mm256_storeu_ps(d,_mm256_permute2f128_ps(u0,u4,0x20));_mm256_storeu_ps(d+ds,_mm256_permute2f128_ps(u1,u5,0x20));_mm256_storeu_ps(d+2*ds,_mm256_permute2f128_ps(u2,u6,0x20));_mm256_storeu_ps(d+3*ds,_mm256_permute2f128_ps(u3,u7,0x20));
  _mm256_storeu_ps(d+4*ds,_mm256_permute2f128_ps(u0,u4,0x31));_mm256_storeu_ps(d+5*ds,_mm256_permute2f128_ps(u1,u5,0x31));_mm256_storeu_ps(d+6*ds,_mm256_permute2f128_ps(u2,u6,0x31));_mm256_storeu_ps(d+7*ds,_mm256_permute2f128_ps(u3,u7,0x31));
}
__attribute__((target("avx2"))) static void stream(char*d,const char*s,size_t n){
  size_t head=(64-((size_t)d&63))&63; if(head>n)head=n; memcpy(d,s,head); d+=head;s+=head;n-=head;
  size_t i=0; for(;i+64<=n;i+=64){__m256i a=_mm256_loadu_si256((const __m256i*)(s+i)),b=_mm256_loadu_si256((const __m256i*)(s+i+32));_mm256_stream_si256((__m256i*)(d+i),a);_mm256_stream_si256((__m256i*)(d+i+32),b);}
  memcpy(d+i,s+i,n-i);
}
static float*scr;
__attribute__((target("avx2"))) static void conv(const float*src,float*dst,int N,int C,int P,int CQ,int G){
  for(int n=0;n<N;n++){const float*s=src+(size_t)n*C*P;float*d=dst+(size_t)n*C*P;
    for(int c0=0;c0<C;c0+=CQ){int cq=C-c0<CQ?C-c0:CQ;
      for(int p0=0;p0<P;p0+=G){int g=P-p0<G?P-p0:G;
        if(getenv("NOTRANS")) continue;
        int p=0; for(;p+8<=g;p+=8){int c=0; for(;c+8<=cq;c+=8) t8(s+(size_t)(p0+p)*C+c0+c,C,scr+(size_t)c*P+p0+p,P); for(;c<cq;c++)for(int k=0;k<8;k++)scr[(size_t)c*P+p0+p+k]=s[(size_t)(p0+p+k)*C+c0+c];}
        for(;p<g;p++)for(int c=0;c<cq;c++)scr[(size_t)c*P+p0+p]=s[(size_t)(p0+p)*C+c0+c];
      }
      if(getenv("NOSTREAM")==0) stream((char*)(d+(size_t)c0*P),(const char*)scr,(size_t)cq*P*4);
    }}
  _mm_sfence();
}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){int N=atoi(argv[1]),C=atoi(argv[2]),P=atoi(argv[3])*atoi(argv[3]);
 size_t el=(size_t)N*C*P; float*src=aligned_alloc(64,el*4),*dst=aligned_alloc(64,el*4),*cp=aligned_alloc(64,el*4);
 for(size_t i=0;i<el;i++)src[i]=i; memset(dst,0,el*4);memset(cp,0,el*4); scr=aligned_alloc(64,2<<20);
 int cqs[]={64,128,256,512,1024}; int gs[]={8,16,32,64};
 for(int ci=0;ci<5;ci++)for(int gi=0;gi<4;gi++){ if((size_t)cqs[ci]*P*4>(1<<20))continue;
  double tc[9],tv[9];
  for(int r=0;r<9;r++){double t=now();memcpy(cp,src,el*4);tc[r]=now()-t;t=now();conv(src,dst,N,C,P,cqs[ci],gs[gi]);tv[r]=now()-t;}
  qsort(tc,9,8,cmp);qsort(tv,9,8,cmp);
  int ok=1; for(int k=0;k<1000;k++){size_t n=rand()%N,c=rand()%C,p=rand()%P; if(dst[(n*C+c)*P+p]!=src[(n*P+p)*C+c])ok=0;}
  printf("CQ %4d G %2d: conv %.1f GB/s copy %.1f ratio %.2f %s\n",cqs[ci],gs[gi],2*el*4/tv[4]/1e9,2*el*4/tc[4]/1e9,tc[4]/tv[4],ok?"":"WRONG");
 }}

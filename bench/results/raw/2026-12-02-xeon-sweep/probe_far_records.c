// Probe: compacting the first D bytes of each S-byte record (NCHW32c / kHWC8 of one channel) of
// a 1 GiB-ish source on one core: scalar loop, with software prefetch at several distances.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static unsigned char *a,*b; static size_t R; static int S,D;
__attribute__((noinline)) static void run(long dist, int hint){
  for(size_t r=0;r<R;r++){
    if(dist && ((r*S)&63)==0 ) { if(hint) _mm_prefetch((char*)a+r*S+dist,_MM_HINT_T0); else _mm_prefetch((char*)a+r*S+dist,_MM_HINT_NTA);}  
    if(D==1) b[r]=a[r*S]; else if(D==2) ((unsigned short*)b)[r]=*(unsigned short*)(a+r*S); else ((unsigned*)b)[r]=*(unsigned*)(a+r*S);
  }
}
__attribute__((noinline)) static void gath(long dist){ // f32 only: 16 records per gather
  __m512i off=_mm512_mullo_epi32(_mm512_set_epi32(15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,0),_mm512_set1_epi32(S));
  for(size_t r=0;r<R;r+=16){ const char*s=(char*)a+r*S; if(dist) for(int k=0;k<16;k++) _mm_prefetch(s+dist+k*S,_MM_HINT_T0);
    _mm512_storeu_si512(b+r*4,_mm512_i32gather_epi32(off,s,1)); }
}
int main(int argc,char**argv){
  S=atoi(argv[1]); D=atoi(argv[2]); size_t src=(size_t)1<<30; R=src/S;
  a=aligned_alloc(4096,src); b=aligned_alloc(4096,R*D); memset(a,1,src); memset(b,2,R*D);
  long dists[]={0,1024,2048,4096,8192,16384};
  for(int hint=1;hint>=0;hint--) for(int i=0;i<6;i++){ if(!hint && i==0) continue; double best=1e9; for(int k=0;k<4;k++){ double t0=now(); run(dists[i],hint); double d=now()-t0; if(d<best)best=d;}
    printf("S=%d D=%d scalar %s dist %5ld: %6.2f GB/s (src+dst)\n",S,D,hint?"T0 ":"NTA",dists[i],((double)src+R*D)/best/1e9); }
  if(D==4) for(int i=0;i<6;i++){ double best=1e9; for(int k=0;k<4;k++){ double t0=now(); gath(dists[i]); double d=now()-t0; if(d<best)best=d;}
    printf("S=%d D=%d gather dist %5ld: %6.2f GB/s\n",S,D,dists[i],((double)src+R*D)/best/1e9); }
}

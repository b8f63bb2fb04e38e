// Records of one f32 channel expanded into 32-byte records (kHWC8 of one channel) with
// non-temporal stores, 8 Mi records (32 MiB in, 256 MiB out), one thread: mode 0 one masked
// 8-byte load per destination vector, mode 1 one 64-byte load per 8 destination vectors,
// mode 2 the template stores alone (no loads; zeros), mode 3 mode 1 with a prefetch 1 KiB
// ahead. Build and run: gcc -O2 -mavx512f -mavx512bw -mavx512vbmi probe_record_stores.c -o /tmp/p && taskset -c 0 /tmp/p
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__m512i I,T;
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void ex(const char*s,char*d,size_t cnt,int mode){
  if(mode==0) for(size_t r=0;r+2<=cnt;r+=2){__m512i v=_mm512_maskz_loadu_epi8(0xff,s+r*4);_mm512_stream_si512((void*)(d+r*32),_mm512_permutex2var_epi8(v,I,T));}
  if(mode==1) for(size_t r=0;r+16<=cnt;r+=16){__m512i v=_mm512_loadu_si512(s+r*4);
     for(int k=0;k<8;k++){ _mm512_stream_si512((void*)(d+(r+2*k)*32),_mm512_permutex2var_epi8(v,I,T)); v=_mm512_alignr_epi32(v,v,2);} }
  if(mode==2) for(size_t r=0;r+2<=cnt;r+=2){_mm512_stream_si512((void*)(d+r*32),T);}
  if(mode==3) for(size_t r=0;r+16<=cnt;r+=16){__m512i v=_mm512_loadu_si512(s+r*4); _mm_prefetch(s+r*4+1024,_MM_HINT_T0);
     for(int k=0;k<8;k++){ _mm512_stream_si512((void*)(d+(r+2*k)*32),_mm512_permutex2var_epi8(v,I,T)); v=_mm512_alignr_epi32(v,v,2);} }
  _mm_sfence();
}
int main(){unsigned char idx[64],tpl[64]; for(int i=0;i<64;i++){idx[i]= (i%32<4)? (i/32)*4+i%32 : 64+i; tpl[i]=0;} I=_mm512_loadu_si512(idx);T=_mm512_loadu_si512(tpl);
 size_t cnt=8<<20;char*s=aligned_alloc(1<<21,cnt*4+4096),*d=aligned_alloc(1<<21,cnt*32);memset(s,1,cnt*4);memset(d,0,cnt*32);
 for(int r=0;r<2;r++) for(int m=0;m<4;m++){double t=now();ex(s,d,cnt,m);t=now()-t;printf("mode %d: %.1f GB/s counted (writes %.1f)\n",m,cnt*36/t/1e9,cnt*32/t/1e9);}
}

// Probe: one core's read, write and copy rates on 32 MiB buffers, warm (just touched) and cold
// (a 512 MiB sweep in between), regular and non-temporal stores.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N (32u<<20)
static char *a,*b,*big;
static volatile long sink;
static void flush(){ long s=0; for(size_t i=0;i<(512u<<20);i+=64){ s+=big[i]; } sink=s; }
static void rd(){ __m512i s=_mm512_setzero_si512(); for(size_t i=0;i<N;i+=64) s=_mm512_add_epi64(s,_mm512_load_si512(a+i)); sink=_mm512_reduce_add_epi64(s);}
static void rd_byte(){ long s=0; for(size_t i=0;i<N;i+=64) s+=a[i]; sink=s;}
static void wr(){ __m512i z=_mm512_set1_epi8(3); for(size_t i=0;i<N;i+=64) _mm512_store_si512(b+i,z);}
static void wr_nt(){ __m512i z=_mm512_set1_epi8(3); for(size_t i=0;i<N;i+=64) _mm512_stream_si512((void*)(b+i),z); _mm_sfence();}
static void cp(){ memcpy(b,a,N);}
static void cp_vec(){ for(size_t i=0;i<N;i+=64) _mm512_store_si512(b+i,_mm512_load_si512(a+i));}
static void cp_nt(){ for(size_t i=0;i<N;i+=64) _mm512_stream_si512((void*)(b+i),_mm512_load_si512(a+i)); _mm_sfence();}
static void cp_nt_pf(){ for(size_t i=0;i<N;i+=64){ _mm_prefetch(a+i+2048,_MM_HINT_T0); _mm512_stream_si512((void*)(b+i),_mm512_load_si512(a+i));} _mm_sfence();}
int main(){
  a=aligned_alloc(4096,N); b=aligned_alloc(4096,N); big=aligned_alloc(4096,512u<<20);
  memset(a,1,N); memset(b,2,N); memset(big,5,512u<<20);
  struct {const char*n; void(*f)(); double bytes;} t[]={{"read",rd,N},{"read 1B/line",rd_byte,N},{"write",wr,N},{"write NT",wr_nt,N},{"memcpy",cp,2.0*N},{"copy vec",cp_vec,2.0*N},{"copy NT",cp_nt,2.0*N},{"copy NT+pf",cp_nt_pf,2.0*N}};
  for(int cold=0;cold<2;cold++) for(int k=0;k<8;k++){
    double best[9]; int m=0;
    for(int r=0;r<7;r++){ if(cold) flush(); else t[k].f(); double t0=now(); t[k].f(); best[m++]=now()-t0; }
    // median
    for(int i=0;i<m;i++)for(int j=i+1;j<m;j++)if(best[j]<best[i]){double x=best[i];best[i]=best[j];best[j]=x;}
    printf("%s %-14s %6.2f GB/s\n", cold?"cold":"warm", t[k].n, t[k].bytes/best[m/2]/1e9);
  }
}

// Streaming stores alone (a non-zero value, 256 MiB): 64-byte, 32-byte, four 64-byte per loop, memset, a read and a copy;
// Build and run: gcc -O2 probe_stream_stores.c -o /tmp/p && taskset -c 0 /tmp/p
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__attribute__((target("avx512f"))) void w512(char*d,size_t n){__m512i v=_mm512_set1_epi32(7);for(size_t i=0;i<n;i+=64)_mm512_stream_si512((void*)(d+i),v);_mm_sfence();}
__attribute__((target("avx2"))) void w256(char*d,size_t n){__m256i v=_mm256_set1_epi32(7);for(size_t i=0;i<n;i+=32)_mm256_stream_si256((void*)(d+i),v);_mm_sfence();}
__attribute__((target("avx512f"))) void w512x4(char*d,size_t n){__m512i v=_mm512_set1_epi32(7);for(size_t i=0;i<n;i+=256){_mm512_stream_si512((void*)(d+i),v);_mm512_stream_si512((void*)(d+i+64),v);_mm512_stream_si512((void*)(d+i+128),v);_mm512_stream_si512((void*)(d+i+192),v);}_mm_sfence();}
__attribute__((target("avx512f"))) void rd(const char*s,size_t n){__m512i a=_mm512_setzero_si512();for(size_t i=0;i<n;i+=64)a=_mm512_add_epi32(a,_mm512_load_si512((const void*)(s+i)));volatile int x=_mm512_reduce_add_epi32(a);}
int main(){size_t n=256<<20;char*d=aligned_alloc(1<<21,n),*s=aligned_alloc(1<<21,n);memset(d,1,n);memset(s,1,n);
for(int r=0;r<3;r++){double t;
t=now();w512(d,n);t=now()-t;printf("nt512 %.1f GB/s  ",n/t/1e9);
t=now();w256(d,n);t=now()-t;printf("nt256 %.1f  ",n/t/1e9);
t=now();w512x4(d,n);t=now()-t;printf("nt512x4 %.1f  ",n/t/1e9);
t=now();memset(d,r,n);t=now()-t;printf("memset %.1f  ",n/t/1e9);
t=now();rd(s,n);t=now()-t;printf("read %.1f  ",n/t/1e9);
t=now();memcpy(d,s,n/2);t=now()-t;printf("copy(r+w) %.1f\n",n/t/1e9);}
}

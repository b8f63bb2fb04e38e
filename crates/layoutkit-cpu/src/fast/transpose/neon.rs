//! The aarch64 kernels (NEON is part of the baseline). Each returns `(da, db)`: it did
//! rows `..da`, columns `..db`. Safety for all: the contract of
//! [`super::transpose_rows`].
use super::Rows;
use std::arch::aarch64::*;

/// 4 x 4 blocks of 4-byte elements: two rounds of `trn` (32-bit, then 64-bit lanes).
pub(super) unsafe fn u32_blocks<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 4 * 4, r.nb() / 4 * 4);
    for a in (0..na).step_by(4) {
        for b in (0..nb).step_by(4) {
            // SAFETY: rows b..b+4 at columns a..a+4 and rows a..a+4 at columns b..b+4
            // are inside the tile.
            unsafe {
                let l = |k: usize| vld1q_u32((r.src(b + k) as *const u32).add(a));
                let (r0, r1, r2, r3) = (l(0), l(1), l(2), l(3));
                let t0 = vtrn1q_u32(r0, r1);
                let t1 = vtrn2q_u32(r0, r1);
                let t2 = vtrn1q_u32(r2, r3);
                let t3 = vtrn2q_u32(r2, r3);
                let q = |x: uint32x4_t| vreinterpretq_u64_u32(x);
                let o = |x: uint64x2_t| vreinterpretq_u32_u64(x);
                let out = [
                    o(vtrn1q_u64(q(t0), q(t2))),
                    o(vtrn1q_u64(q(t1), q(t3))),
                    o(vtrn2q_u64(q(t0), q(t2))),
                    o(vtrn2q_u64(q(t1), q(t3))),
                ];
                for (k, v) in out.into_iter().enumerate() {
                    vst1q_u32((r.dst(a + k) as *mut u32).add(b), v);
                }
            }
        }
    }
    (na, nb)
}

/// 8 x 8 blocks of 2-byte elements: `trn` on 16-, 32- and 64-bit lanes.
pub(super) unsafe fn u16_blocks<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 8 * 8);
    for a in (0..na).step_by(8) {
        for b in (0..nb).step_by(8) {
            // SAFETY: inside the tile, as above.
            unsafe {
                let mut v = [vdupq_n_u16(0); 8];
                for (k, x) in v.iter_mut().enumerate() {
                    *x = vld1q_u16((r.src(b + k) as *const u16).add(a));
                }
                // Pairs of rows: 2x2 blocks of 16-bit elements.
                let mut t = [vdupq_n_u16(0); 8];
                for i in 0..4 {
                    t[2 * i] = vtrn1q_u16(v[2 * i], v[2 * i + 1]);
                    t[2 * i + 1] = vtrn2q_u16(v[2 * i], v[2 * i + 1]);
                }
                // Quads: 2x2 blocks of 32-bit pairs.
                let w = |x: uint16x8_t| vreinterpretq_u32_u16(x);
                let mut u = [vdupq_n_u32(0); 8];
                for g in 0..2 {
                    for j in 0..2 {
                        u[4 * g + j] = vtrn1q_u32(w(t[4 * g + j]), w(t[4 * g + 2 + j]));
                        u[4 * g + 2 + j] = vtrn2q_u32(w(t[4 * g + j]), w(t[4 * g + 2 + j]));
                    }
                }
                // Eights: 2x2 blocks of 64-bit quads.
                let q = |x: uint32x4_t| vreinterpretq_u64_u32(x);
                for j in 0..4 {
                    let lo = vtrn1q_u64(q(u[j]), q(u[4 + j]));
                    let hi = vtrn2q_u64(q(u[j]), q(u[4 + j]));
                    vst1q_u16((r.dst(a + j) as *mut u16).add(b), vreinterpretq_u16_u64(lo));
                    vst1q_u16(
                        (r.dst(a + 4 + j) as *mut u16).add(b),
                        vreinterpretq_u16_u64(hi),
                    );
                }
            }
        }
    }
    (na, nb)
}

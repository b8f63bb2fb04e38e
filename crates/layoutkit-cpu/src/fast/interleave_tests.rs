//! Tests of the few-rows kernels against their definitions.

use super::*;

/// One build of [`kernel`].
type Build = unsafe fn(*const u8, usize, *mut u8, usize, Dir);

/// Every build of both kernels (baseline, AVX2, AVX-512 where the CPU has it) against the
/// definition, for every element size and row count, pixel counts around vector widths,
/// sources and destinations at odd byte offsets.
fn check<const E: usize, const C: usize>() {
    for n in [1, 2, 7, 15, 16, 17, 31, 64, 65, 200] {
        for off in [0, 1, 3] {
            let row = n * E + 5;
            let src: Vec<u8> = (0..off + C * row).map(|i| (i * 7 % 251) as u8).collect();
            let s = src[off..].as_ptr();
            let want_i: Vec<u8> = (0..n * C * E)
                .map(|i| {
                    let (p, k, b) = (i / (C * E), i / E % C, i % E);
                    src[off + k * row + p * E + b]
                })
                .collect();
            let want_d: Vec<u8> = (0..C * row)
                .map(|i| {
                    let (k, p, b) = (i / row, i % row / E, i % row % E);
                    if i % row < n * E {
                        src[off + p * C * E + k * E + b]
                    } else {
                        0
                    }
                })
                .collect();
            #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
            let mut builds: Vec<Build> = vec![kernel::<E, C>];
            #[cfg(target_arch = "x86_64")]
            {
                if crate::fast::transpose::avx2_builds() {
                    builds.push(x86_avx2::<E, C>);
                }
                if crate::fast::transpose::avx512_builds() {
                    builds.push(x86_avx512::<E, C>);
                }
            }
            for build in builds {
                let mut got = vec![0u8; off + n * C * E];
                // SAFETY: C rows of n elements from `s`, `row` bytes apart; n * C elements
                // of destination (the CPU has each build's features: checked above).
                unsafe { build(s, row, got[off..].as_mut_ptr(), n, Dir::Interleave) };
                assert_eq!(&got[off..], &want_i[..], "interleave E={E} C={C} n={n}");
                let mut got = vec![0u8; off + C * row];
                // SAFETY: n pixels of C elements from `s`; C rows of `row >= n * E` bytes.
                unsafe { build(s, row, got[off..].as_mut_ptr(), n, Dir::Deinterleave) };
                assert_eq!(&got[off..], &want_d[..], "deinterleave E={E} C={C} n={n}");
            }
        }
    }
}

/// [`deinterleave_strided`] against its definition: every element size and row count,
/// records a little and much longer than their elements, odd byte offsets.
#[test]
fn strided_records_split_as_defined() {
    for e in [1usize, 2, 4, 8] {
        for c in 2..=MAX_ROWS {
            for extra in [1, 3, 29 * e] {
                let (px, n, off) = (c * e + extra, 37, 3);
                let src: Vec<u8> = (0..off + n * px).map(|i| (i * 13 % 251) as u8).collect();
                let row = n * e + 2;
                let mut got = vec![0u8; c * row];
                // SAFETY: n records of `px` bytes from `src[off..]`; c rows of `row >= n *
                // e` bytes.
                let ok = unsafe {
                    deinterleave_strided(src[off..].as_ptr(), px, got.as_mut_ptr(), row, n, c, e)
                };
                assert!(ok);
                for k in 0..c {
                    for p in 0..n {
                        let want = &src[off + p * px + k * e..][..e];
                        assert_eq!(&got[k * row + p * e..][..e], want, "e={e} c={c} px={px}");
                    }
                    assert!(got[k * row + n * e..(k + 1) * row].iter().all(|&b| b == 0));
                }
            }
        }
    }
}

#[test]
fn every_build_matches_the_definition() {
    check::<1, 2>();
    check::<1, 3>();
    check::<1, 4>();
    check::<2, 2>();
    check::<2, 3>();
    check::<2, 4>();
    check::<4, 2>();
    check::<4, 3>();
    check::<4, 4>();
    check::<8, 2>();
    check::<8, 3>();
    check::<8, 4>();
}

//! Tests of the fused transpose-and-cast kernels against the reference casts.

use super::*;
use crate::fast::transpose::Table;
use crate::fast::AlignedBuf;
use layoutkit_core::cast::Scalar;
use layoutkit_core::{CastSpec, DType, Quantization};

/// Values at the edges of every step: rounding ties after scaling, NaN, infinities,
/// subnormals, the f16 overflow boundary, the 8-bit saturation points.
fn edge_values(n: usize, scale: f32) -> Vec<f32> {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        1e-40,
        65504.0,
        65520.0,
        65519.99,
        -65536.0,
        1e30,
        -1e30,
    ];
    (0..n)
        .map(|i| match i % 4 {
            0 => specials[i / 4 % specials.len()],
            // Ties after dividing by the scale: (k + 0.5) * scale.
            1 => ((i as f32 / 4.0) - 200.0 + 0.5) * scale,
            2 => (i as f32 * 0.37 - 300.0) * scale,
            _ => (i as f32 * 1.618).sin() * 70000.0,
        })
        .collect()
}

/// Runs `fused` on a tile of `na` destination rows (64-byte aligned) by `nb` source rows
/// `s_row` floats apart holding `src`, and compares every element it did with the
/// reference. Returns `(da, db)`.
fn assert_tile_matches(
    fused: FusedCast,
    spec: CastSpec,
    (na, nb, s_row): (usize, usize, usize),
    stream: bool,
    src: &[f32],
) -> (usize, usize) {
    let ds = spec.dst.size_bytes();
    let d_row = (nb * ds).next_multiple_of(64);
    let mut dst = AlignedBuf::zeroed(na * d_row);
    let srows: Vec<*const u8> = (0..nb)
        .map(|b| src[b * s_row..].as_ptr() as *const u8)
        .collect();
    let base = dst.as_mut_ptr();
    let drows: Vec<*mut u8> = (0..na).map(|a| base.wrapping_add(a * d_row)).collect();
    let rows = Table {
        src: &srows,
        dst: &drows,
    };
    // SAFETY: every row holds the tile; the kernel's features were checked.
    let (da, db) = unsafe { fused.run(rows, stream) };
    crate::fast::transpose::store_fence();
    for a in 0..da {
        for b in 0..db {
            let x = src[b * s_row + a];
            let mut want = [0u8; 2];
            spec.apply(Scalar::F32(x)).write(&mut want);
            let at = a * d_row + b * ds;
            assert_eq!(
                &dst[at..at + ds],
                &want[..ds],
                "{spec:?}: {x:e} at ({a}, {b}) of {na} x {nb}, rows {s_row} apart"
            );
        }
    }
    (da, db)
}

/// The tiles the checks run: `(na, nb, source row distance in floats)` and whether
/// streaming stores are allowed; source rows close together and a page or more apart
/// (the staged 8-bit kernel reads them in different orders); for the AVX-512 kernel, rows
/// and columns past its chunks (256 rows) and groups (64 columns), and partial blocks; for
/// the AVX2 kernel's quarters, rows far apart past a chunk.
const TILES: [((usize, usize, usize), bool); 10] = [
    ((8, 64, 11), true),
    ((16, 128, 19), true),
    ((16, 64, 1030), true),
    ((32, 64, 1100), false),
    ((9, 70, 12), false),
    ((8, 8, 11), false),
    ((300, 200, 1030), true),
    ((272, 192, 1100), true),
    ((261, 48, 300), false),
    ((37, 17, 40), true),
];

/// Runs `f` with the AVX2 kernels, then (where the CPU has them) the AVX-512 ones; `f` is
/// told whether the AVX-512 quantising kernel runs.
fn on_every_build(f: impl Fn(bool)) {
    crate::fast::transpose::tests::with_avx2_builds(|| f(false));
    #[cfg(target_arch = "x86_64")]
    if crate::fast::transpose::avx512_quantise() {
        f(true);
    }
}

fn check(spec: CastSpec) {
    let Some(fused) = FusedCast::for_spec(&spec) else {
        return; // no kernel on this CPU: nothing to compare
    };
    on_every_build(|avx512| {
        for ((na, nb, s_row), stream) in TILES {
            let src = edge_values(nb * s_row, spec.quant.scale);
            let (da, db) = assert_tile_matches(fused, spec, (na, nb, s_row), stream, &src);
            // Blocks are 8 rows by 8 (f16) or 16 (8-bit) columns at least; the AVX-512
            // quantising kernel does the whole tile from 16 columns on.
            let min_cols = if spec.dst.size_bytes() == 2 { 8 } else { 16 };
            assert_eq!(da > 0 && db > 0, nb >= min_cols, "blocks of {na}x{nb}");
            if avx512 && spec.dst.size_bytes() == 1 && nb >= 16 {
                assert_eq!((da, db), (na, nb));
            }
        }
    });
}

/// On values spread over the range and packed around the rounding ties (a few units in the
/// last place either side of (k + 0.5) * scale), every quantised result equals the
/// reference's.
#[test]
fn quantisation_equals_the_division_around_ties() {
    let mut next = crate::fast::xorshift(0x9e37_79b9_7f4a_7c15);
    for (scale, dst, zero_point) in [
        (0.1f32, DType::I8, 3),
        (0.0123, DType::I8, -100),
        (1.0 / 3.0, DType::U8, 128),
        (0.75, DType::I8, 0),
        (2.5, DType::U8, 7),
        (1e-3, DType::I8, 127),
        (7.0e-6, DType::U8, 255),
    ] {
        let q = Quantization { scale, zero_point };
        let spec = CastSpec::new(DType::F32, dst, Some(q)).unwrap();
        let Some(fused) = FusedCast::for_spec(&spec) else {
            return;
        };
        // Ties in about half of the values, in one in 64, or none: stages quantised by
        // the multiplication alone, and stages sent back to the division.
        for (round, ties_in) in (0..60).zip([2, 64, u64::MAX].into_iter().cycle()) {
            let ((na, nb, s_row), stream) =
                [TILES[0], TILES[1], TILES[2], TILES[3], TILES[7]][round % 5];
            let src: Vec<f32> = (0..nb * s_row)
                .map(|_| {
                    let r = next();
                    let k = (r % 300) as f32 - 150.0;
                    let tie = (k + 0.5) * scale;
                    // Nudge by -4..4 units in the last place, or a value anywhere.
                    if (r >> 32).is_multiple_of(ties_in) {
                        f32::from_bits((tie.to_bits() as i64 + ((r >> 8) % 9) as i64 - 4) as u32)
                    } else {
                        ((r >> 16) % 1_000_000) as f32 / 1_000_000.0 * 300.0 * scale - 150.0 * scale
                    }
                })
                .collect();
            on_every_build(|avx512| {
                let done = assert_tile_matches(fused, spec, (na, nb, s_row), stream, &src);
                // The AVX2 kernels leave rows past whole 16-row blocks to the caller.
                if avx512 || na % 16 == 0 {
                    assert_eq!(done, (na, nb));
                }
            });
        }
    }
}

/// Destination rows of 32 bytes back to back (`NCHW32c` pixels of 8-bit values): the
/// packed kernels, on 16-row blocks and a partial block (left to the caller by the AVX2
/// kernel), and past the AVX-512 kernel's 256-row chunks.
#[test]
fn packed_quantising_rows_equal_the_reference() {
    let q = Some(Quantization {
        scale: 0.02,
        zero_point: -5,
    });
    let spec = CastSpec::new(DType::F32, DType::I8, q).unwrap();
    let Some(fused) = FusedCast::for_spec(&spec) else {
        return;
    };
    on_every_build(|avx512| packed_rows_match(fused, spec, avx512));
}

fn packed_rows_match(fused: FusedCast, spec: CastSpec, avx512: bool) {
    use crate::fast::transpose::Strided;
    for na in [16, 40, 301] {
        let s_row = na + 5;
        let src = edge_values(32 * s_row, 0.02);
        let mut dst = AlignedBuf::zeroed(na * 32);
        let rows = Strided {
            src: src.as_ptr() as *const u8,
            src_row: s_row * 4,
            dst: dst.as_mut_ptr(),
            dst_row: 32,
            na,
            nb: 32,
        };
        // SAFETY: every row holds the tile; the kernel's features were checked.
        let (da, db) = unsafe { fused.run(rows, true) };
        crate::fast::transpose::store_fence();
        // The AVX2 kernel leaves a partial 16-row block to the caller.
        let want_rows = if avx512 { na } else { na / 16 * 16 };
        assert_eq!((da, db), (want_rows, 32));
        for a in 0..da {
            for b in 0..32 {
                let x = src[b * s_row + a];
                let mut want = [0u8; 1];
                spec.apply(Scalar::F32(x)).write(&mut want);
                assert_eq!(dst[a * 32 + b], want[0], "{x:e} at ({a}, {b})");
            }
        }
    }
}

#[test]
fn fused_casts_equal_the_reference_on_edge_values() {
    check(CastSpec::new(DType::F32, DType::F16, None).unwrap());
    // Scales around 2^-125, below which subnormal inputs are no longer replaced by zero.
    for (scale, zero_point) in [
        (0.01, 3),
        (1.0, 0),
        (0.5, -128),
        (3.0, 127),
        (1e-38, 0),
        (3e-38, 1),
        (2.350_988_7e-38, -2),
    ] {
        let q = Some(Quantization { scale, zero_point });
        check(CastSpec::new(DType::F32, DType::I8, q).unwrap());
    }
    for (scale, zero_point) in [(0.01, 128), (1.0, 0), (2.5, 255)] {
        let q = Some(Quantization { scale, zero_point });
        check(CastSpec::new(DType::F32, DType::U8, q).unwrap());
    }
}

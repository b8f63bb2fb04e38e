//! f32 -> f16 tiles cast first, then transposed as 2-byte elements, where AVX-512 runs: each
//! source row of the tile is cast in source order into a stage in L1 (sixteen values per
//! `vcvtps2ph`, [`super::half_runs`]), and the stage is transposed by the 2-byte kernels. The
//! fused AVX2 kernel ([`super::cast_tiles`]) transposes 8 x 8 blocks of f32 and casts them
//! eight values per instruction.
//!
//! Taken only for tiles whose source is one range (the source rows back to back: whole
//! planes of NCHW) and whose destination rows are shorter than a line, written into the
//! scratch tile (their destination one range, streamed out after): f32 `NCHW -> NHWC` into
//! f16, 32 MiB, one thread on a Zen 4, alternated three times: C = 16 and 24 on 14 x 14
//! planes 0.40-0.42 -> 0.61-0.72 of the copy. Tiles of source rows apart (planes of 56 x 56
//! and more, 16-24 channels) ran 0.67-0.75x this way, as did tiles written straight into a
//! destination in cache (0.77-0.90x under 1 MiB): the fused kernel reads rows apart with
//! its own prefetches, and needs no stage.

use layoutkit_core::DType;

use super::{transpose, Job, TileBuf, TILE_BYTES};

impl Job<'_> {
    /// Runs the tile `rows` (f32 source rows `nb` of `na` values, f16 destination rows `na`
    /// of `nb` values, no padding; the caller's destination rows are the scratch tile's) as
    /// the module docs say, with plain stores, when this job is an f32 -> f16 cast, AVX-512
    /// runs, the stage holds the tile, the source rows are back to back and the destination
    /// rows shorter than a line; returns false (nothing written) otherwise.
    ///
    /// # Safety
    /// As [`transpose::transpose_rows`] for `rows` with 4-byte source and 2-byte destination
    /// elements.
    pub(super) unsafe fn half_tile<R: transpose::Rows>(
        &self,
        rows: R,
        bufs: &mut Option<Box<[TileBuf; 2]>>,
    ) -> bool {
        let (na, nb) = (rows.na(), rows.nb());
        if (self.cast.src, self.cast.dst) != (DType::F32, DType::F16)
            || !super::half_runs::enabled()
            || na * nb * 2 > 2 * TILE_BYTES
            || nb * 2 >= 64
            || (nb >= 2 && rows.src(1).addr().wrapping_sub(rows.src(0).addr()) != na * 4)
        {
            return false;
        }
        let bufs = bufs
            .get_or_insert_with(|| Box::new([TileBuf([0; TILE_BYTES]), TileBuf([0; TILE_BYTES])]));
        // SAFETY: the two buffers are one array of 2 * TILE_BYTES bytes.
        let stage = unsafe {
            std::slice::from_raw_parts_mut(bufs.as_mut_ptr().cast::<u8>(), 2 * TILE_BYTES)
        };
        let run = na * 2;
        for b in 0..nb {
            // SAFETY: source row b's na values are inside the source (the caller's contract).
            let from = unsafe { std::slice::from_raw_parts(rows.src(b), na * 4) };
            (self.run)(from, &mut stage[b * run..(b + 1) * run], na, &self.cast);
        }
        let staged = transpose::Staged {
            rows,
            stage: stage.as_ptr(),
            run,
        };
        // SAFETY: the stage's nb rows of na f16 values; the destination rows as the caller's.
        unsafe { transpose::transpose_rows_inlined(staged, 2, false) };
        true
    }
}

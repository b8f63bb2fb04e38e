//! The planes of a few-channel image (2-4 channels) into padded records where the job
//! streams (RGB into NCHW32c's records of i8 or f16, identity conversions): the planes
//! interleaved into pixels of a power-of-two count of elements (a third channel's pixels take
//! a fourth element of the fill value), then those pixels expanded into whole records by the
//! streamed records kernels ([`super::records_stream`]), which build each destination vector
//! in registers over a template of the fill and store it past the cache.
//!
//! Why: these tiles went through the transposes with the fill as extra rows (29 of every 32
//! in i8 NCHW32c of 3 channels), transposed into the scratch tile and copied out from there:
//! two passes over a destination that is nine tenths fill.

use super::Job;

/// The elements of a pixel [`Job::planes_into_records`] builds for `rows` channels: 2 or 4.
fn pixel_elements(rows: usize) -> usize {
    rows.next_power_of_two()
}

impl Job<'_> {
    /// Whether [`Self::planes_into_records`] takes tiles of `rows` planes of `unit` elements
    /// into records of `rows + pad` units: an identity conversion of single elements of 1 or
    /// 2 bytes that streams, into records of 32 bytes or more, 2-4 rows, enough pad for the
    /// pixel's extra element, and sizes the streamed records kernels take on this CPU (see
    /// [`super::records::expand_streaming_takes`]). Measured on a Xeon (family 6 model 207),
    /// one thread, against the padded transposes, alternated three times: i8 `NCHW ->
    /// NCHW32c` C = 3-4 7.8-9.7 -> 12.1-13.6 GB/s, f16 C = 4 10.7 -> 12.4, C = 3 10.6 -> 11.2;
    /// but f32 `NCHW -> NCHW32c` C = 3 14.0 -> 11.5 and `NCHW -> kHWC8` (16- and 32-byte
    /// records of f16 and f32) 14.1-16.1 -> 9.0-9.4: the transposes write those records'
    /// whole lines already, and the interleave is one more pass.
    pub(super) fn planes_records_take(&self, rows: usize, unit: usize, pad: usize) -> bool {
        let e = self.cast.src.size_bytes();
        let px = pixel_elements(rows);
        self.cast.is_identity()
            && self.stream
            && unit == 1
            && e <= 2
            && (rows + pad) * e >= 32
            && (2..=super::interleave::MAX_ROWS).contains(&rows)
            && rows + pad >= px
            && (rows + pad - px) * e <= self.fill_line.len()
            // (An aligned address: each tile checks its own.)
            && super::records::expand_streaming_takes(0, px * e, (rows + pad) * e)
    }

    /// Writes `pixels` records of `rows + pad` elements of `e` bytes from `dst`: record `p`'s
    /// first `rows` elements from the `rows` source rows `src_row` bytes apart in `src`
    /// (element `p` of each), the rest the fill value; streamed where the kernel takes `dst`'s
    /// alignment, else with plain stores ([`super::records::expand`]). Returns true.
    ///
    /// # Safety
    /// [`Self::planes_records_take`]`(rows, 1, pad)`; `src` holds the rows (the last one
    /// `pixels * e` bytes long); `dst` is this item's, writable for `pixels * (rows + pad) * e`
    /// bytes and not read by anyone meanwhile; `buf` holds `2 * pixels * 4 * e` bytes.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn planes_into_records(
        &self,
        src: &[u8],
        src_row: usize,
        dst: *mut u8,
        (pixels, rows, e): (usize, usize, usize),
        pad: usize,
        buf: &mut [u8],
    ) -> bool {
        let px = pixel_elements(rows);
        let (data, out) = (px * e, (rows + pad) * e);
        let row = pixels * e;
        let (planes, rest) = buf.split_at_mut(px * row);
        let packed = &mut rest[..px * row];
        for k in 0..rows {
            planes[k * row..(k + 1) * row].copy_from_slice(&src[k * src_row..k * src_row + row]);
        }
        for part in planes[rows * row..].chunks_mut(self.fill_line.len()) {
            part.copy_from_slice(&self.fill_line[..part.len()]);
        }
        // SAFETY: `planes` holds `px` rows of `pixels` elements back to back, `packed` room
        // for `pixels * px` elements; (px, e) is one of the interleave's pairs (2 or 4 rows,
        // e = 1, 2, 4 or 8: checked by `planes_records_take`'s sizes).
        let done = unsafe {
            super::interleave::interleave(planes.as_ptr(), row, packed.as_mut_ptr(), pixels, px, e)
        };
        debug_assert!(done, "the interleave takes {px} rows of {e}-byte elements");
        // SAFETY: the caller's contract for `dst`.
        let records = unsafe { std::slice::from_raw_parts_mut(dst, pixels * out) };
        let fill = &self.fill_line[..out - data];
        let written = if super::records::expand_streaming_takes(dst.addr(), data, out) {
            super::records::expand_streamed_records(packed, records, (data, out), fill)
        } else {
            super::records::expand(packed, records, pixels, data, out, fill)
        };
        debug_assert!(
            written,
            "the records kernels know the sizes (`planes_records_take`)"
        );
        written
    }
}

//! Per work item scratch buffers, kept on each thread between items.

use super::{tile_tables, AlignedBuf, TileBuf};

/// Per work item scratch: row tables of the current tile, and for casting tiles two buffers
/// made on first use (zeroing them per tile cost more than the tile). The buffers outlive the
/// item: [`Scratch::new`] takes the ones a previous item on this thread left, and dropping a
/// `Scratch` leaves its buffers for the next (zeroing a fresh 64 KiB buffer on every call
/// doubled the time of a 4 KiB conversion).
pub(super) struct Scratch {
    pub(super) src_rows: Vec<isize>,
    pub(super) dst_rows: Vec<isize>,
    pub(super) src_ptrs: Vec<*const u8>,
    pub(super) dst_ptrs: Vec<*mut u8>,
    pub(super) bufs: Option<Box<[TileBuf; 2]>>,
    /// A tile whose destination is contiguous, before it is streamed out.
    pub(super) stream_buf: Option<AlignedBuf>,
    /// The last periodic row table of tiles over compound rows, with what it was built from.
    pub(super) periodic: Option<(tile_tables::PeriodicKey, tile_tables::PeriodicRows)>,
    /// The lane blocks' output area, lane planes and fill line or sink (`lane_blocks`).
    pub(super) lane_buf: Option<AlignedBuf>,
    /// The tile shape of the item's tiles, made on its first tile (`Job::tiles`).
    pub(super) tile_shape: Option<(usize, usize)>,
}

/// Scratch buffers kept on this thread between work items (see [`Scratch`]).
type KeptBuffers = (
    Option<Box<[TileBuf; 2]>>,
    Option<AlignedBuf>,
    Option<AlignedBuf>,
);

thread_local! {
    static KEPT: std::cell::RefCell<KeptBuffers> = const { std::cell::RefCell::new((None, None, None)) };
}

impl Scratch {
    /// Empty row tables and the buffers this thread kept, if any.
    pub(super) fn new() -> Scratch {
        let (bufs, stream_buf, lane_buf) = KEPT
            .try_with(|k| std::mem::take(&mut *k.borrow_mut()))
            .unwrap_or_default();
        Scratch {
            src_rows: Vec::new(),
            dst_rows: Vec::new(),
            src_ptrs: Vec::new(),
            dst_ptrs: Vec::new(),
            bufs,
            stream_buf,
            periodic: None,
            lane_buf,
            tile_shape: None,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let (bufs, stream) = (self.bufs.take(), self.stream_buf.take());
        let lanes = self.lane_buf.take();
        let _ = KEPT.try_with(|k| {
            let mut k = k.borrow_mut();
            if k.0.is_none() {
                k.0 = bufs;
            }
            if k.1.is_none() {
                k.1 = stream;
            }
            if k.2.is_none() {
                k.2 = lanes;
            }
        });
    }
}

//! The register-blocked convolution: f32 activations in NCHW, NHWC or `NCHW<x>c`, filters
//! packed once into tile panels (the `OIHW<2v>o`-style blocks of oneDNN, `v` the vector width),
//! output written straight into `NCHW<x>c` (x a multiple of `v`) or NHWC, threads over
//! (output-channel pair, row band) items, bias and ReLU fused into the tile's store.
//!
//! Each tile keeps `P` output pixels by two vectors of output channels in registers for the
//! whole reduction chunk (taps times the chunk's input channels), see [`microkernel`]; on
//! x86, rows too short for full tiles (7 pixels on AVX2) go two at a time
//! ([`schedule::two_rows_win`]). Builds: AVX-512F (16 lanes, P <= 12), AVX2 + FMA (8 lanes,
//! P <= 6), portable (8 lanes, P <= 4; the aarch64 path), chosen at run time
//! ([`ConvKernels`]). The reduction is split into chunks
//! whose weights fit half of the L1 data cache (sizes from sysfs), and each group of output
//! rows whose partial sums fit a quarter of it runs chunk by chunk: every tile of the group
//! reads the chunk's weights from L1, and the partial sums (kept in the output between
//! chunks) stay there too.
//!
//! Where O ends inside a vector, the last vector stores its real lanes only, or with zeros in
//! a channel block's padding ([`output`]). 1x1 layers at stride 1 on NCHW activations and
//! output take a product vectorised along the pixels instead ([`pointwise`]).
//!
//! Work items are (pair, row band) or, where the input outweighs the filter, (row band,
//! pairs), see [`schedule`]; in the latter case a padded input is copied by each band for
//! itself into an L2-sized buffer rather than whole before the tiles run. A call's padded
//! input copy and output buffer (when it needs them) are kept for the next call (up to four
//! buffers of at most 256 MiB each), so repeated calls do not pay for fresh pages.
//!
//! Not covered (callers fall back to [`crate::conv2d_fast`], as [`conv2d_blocked`] does):
//! grouped convolutions whose output channels per group are not a multiple of the vector width
//! (depthwise among them), activations that are not f32 or not in the `N, C/x, H, W, x` family.

mod microkernel;
#[cfg(target_arch = "x86_64")]
mod microkernel_x86;
mod output;
mod packing;
mod padded;
mod pointwise;
mod schedule;
pub(crate) use microkernel::{Portable, Simd};
#[cfg(target_arch = "x86_64")]
pub(crate) use microkernel_x86::{Avx2, Avx512};
pub(crate) use packing::cache_sizes;
pub(crate) mod runtime;
mod supergroups;

use layoutkit_core::conv::Conv2d;
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, ShapedLayout};

use crate::conv_fast::{channel_block, Activation};
use crate::conv_reference::{check_problem, no_scale};
use crate::{convert, convert_fast, Epilogue, Error, TensorRef};
use microkernel::Run;
use output::{out_map, unwritten_slots, OutMap};
use packing::{pack_filter, prepare_input, Blocks, Input, Source};
use padded::Padded;
pub use runtime::ConvKernels;
use runtime::{f32s, filter_f32, give_scratch, pool, take_scratch};
use schedule::BandCopies;
pub use supergroups::{blocked_supergroup, expand_groups};

/// A filter packed once for [`conv2d_blocked_into`]: panels for one kernel build and group
/// count (an inference engine keeps them with the weights).
#[derive(Clone, Debug)]
pub struct BlockedFilter {
    oihw: ShapedLayout,
    groups: usize,
    kernels: ConvKernels,
    /// Input channels per reduction chunk ([`packing::chunk_channels`]).
    kc: usize,
    /// The panels' f32 values, 64-byte aligned: every panel row (`2 * lanes` floats) then
    /// starts a cache line, so the tiles' vector loads never straddle two lines (unaligned
    /// weights cost the 7-pixel tile 12% in L1).
    panels: crate::AlignedBuf,
}

impl BlockedFilter {
    /// Packs `w` (axes O, I, H, W; any layout and element type) for `groups` groups and the
    /// build `kernels` resolves to. Errors when O is not a multiple of `groups`, the buffer
    /// does not match its layout, or the CPU lacks the build.
    pub fn new(
        w: TensorRef<'_>,
        groups: usize,
        kernels: ConvKernels,
    ) -> Result<BlockedFilter, Error> {
        let kernels = kernels.resolve()?;
        let oihw = parse_format("OIHW")?.shaped(&w.layout.dims())?;
        let [o, cg, kh, kw] = [0, 1, 2, 3].map(|i| oihw.extents()[i]);
        if groups == 0 || o % groups != 0 {
            return Err(Error::Unsupported(format!(
                "a filter with O = {o} cannot be split into {groups} groups"
            )));
        }
        let (_, wv) = filter_f32(&w, "OIHW")?;
        let lanes = kernels.tables().0;
        let kc = packing::chunk_channels(kh * kw, lanes);
        let packed = pack_filter(&wv, groups, o / groups, cg, kh * kw, lanes, kc);
        let mut panels = crate::AlignedBuf::zeroed(packed.len() * 4);
        for (d, v) in panels.chunks_exact_mut(4).zip(&packed) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
        Ok(BlockedFilter {
            oihw,
            groups,
            kernels,
            kc,
            panels,
        })
    }

    /// The build the panels were packed for.
    pub fn kernels(&self) -> ConvKernels {
        self.kernels
    }
}

/// Why [`conv2d_blocked_into`] does not take these operands, or None when it does (see the
/// module doc for what it covers).
pub fn conv2d_blocked_unsupported(x: &TensorRef<'_>, w: &BlockedFilter) -> Option<String> {
    if x.dtype != DType::F32 || x.layout.axes().len() != 4 || channel_block(x.layout).is_none() {
        return Some(format!(
            "the blocked convolution takes f32 activations in NCHW, NHWC or NCHW<x>c, not {} {}",
            x.dtype,
            x.layout.layout()
        ));
    }
    let og = w.oihw.extents()[0] / w.groups;
    let lanes = w.kernels.tables().0;
    (w.groups > 1 && !og.is_multiple_of(lanes)).then(|| {
        format!(
            "grouped convolutions need output channels per group ({og}) in whole vectors of {lanes}"
        )
    })
}

/// The convolution of [`crate::conv2d_reference`] with the blocked kernels, falling back to
/// [`crate::conv2d_fast`] for what they do not cover ([`conv2d_blocked_unsupported`]).
///
/// Contract: as [`crate::conv2d_fast`] (same checks; f32 sums, `||out - ref|| / ||ref||`
/// within 1e-5 in the tests; the result does not depend on `threads`).
#[allow(clippy::too_many_arguments)]
pub fn conv2d_blocked(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
    threads: usize,
    kernels: ConvKernels,
) -> Result<Vec<u8>, Error> {
    no_scale(epilogue, "blocked")?;
    let out_dims = check_problem(conv, x.layout, w.layout, epilogue, y)?;
    if crate::conv2d_depthwise_supports(conv, &x, &w) {
        return crate::conv_depthwise::conv2d_depthwise(
            conv, x, w, epilogue, &out_dims, y, y_dtype, threads, kernels,
        );
    }
    // Groups whose output channels are not whole vectors: super-groups of a block-diagonal
    // filter.
    let o = crate::conv_fast::letter(&w.layout.dims(), 'O').unwrap_or(0);
    let lanes = kernels.resolve()?.tables().0;
    let s = blocked_supergroup(conv.groups, o / conv.groups.max(1), lanes);
    if s > 1 {
        let (ws, wb) = expand_groups(w, conv.groups, s)?;
        let joined = Conv2d {
            groups: conv.groups / s,
            ..*conv
        };
        let w = TensorRef {
            layout: &ws,
            dtype: DType::F32,
            data: &wb,
        };
        return conv2d_blocked(&joined, x, w, epilogue, y, y_dtype, threads, kernels);
    }
    let packed = BlockedFilter::new(w, conv.groups, kernels)?;
    if conv2d_blocked_unsupported(&x, &packed).is_some() {
        return crate::conv2d_fast(conv, x, w, epilogue, y, y_dtype, threads);
    }
    let y32 = if y_dtype == DType::F32 {
        y.clone()
    } else {
        parse_format("NCHW")?.shaped(&y.dims())?
    };
    let mut out = crate::AlignedBuf::zeroed(y32.bytes(DType::F32)?);
    conv2d_blocked_into(conv, x, &packed, epilogue, &y32, &mut out, threads)?;
    if y_dtype == DType::F32 {
        return Ok(out.to_vec());
    }
    convert(&y32, &out, y, &CastSpec::new(DType::F32, y_dtype, None)?)
}

/// The addressing of a layout in the `N, C/x, H, W, x` family (see [`channel_block`]), from
/// the family's closed form: `offset = ((n * ceil(C/x) + c/x) * H + h) * W * x + w * x + c % x`.
/// (The same numbers as core's forward map, without a map call per channel.)
fn activation(layout: &ShapedLayout) -> Activation {
    let x = channel_block(layout).unwrap_or(1).max(1);
    let e = |l: char| {
        layoutkit_core::Axis::from_letter(l)
            .and_then(|a| layout.extent(a))
            .unwrap_or(1)
    };
    let (c, h, w) = (e('C'), e('H'), e('W'));
    let plane = h * w * x;
    Activation {
        sn: c.div_ceil(x) * plane,
        sh: w * x,
        sw: x,
        chan: (0..c).map(|ci| (ci / x) * plane + ci % x).collect(),
    }
}

/// A pointer the work items share; each writes its own output region (the blocked kernels'
/// (channel pair, row band) regions, the depthwise kernel's rows).
#[derive(Clone, Copy)]
pub(crate) struct Shared(pub(crate) *mut f32);
// SAFETY: items write disjoint regions; see `conv2d_blocked_into` and
// `conv2d_depthwise_into`.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// The pointer (a method, so closures capture the whole `Shared`).
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

/// [`conv2d_blocked`] without the fallback, into `out` (f32 in layout `y`, all bytes
/// written), with a filter packed by [`BlockedFilter::new`] for `conv.groups` groups.
///
/// Errors as [`crate::conv2d_fast`], and when [`conv2d_blocked_unsupported`] names a reason.
pub fn conv2d_blocked_into(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: &BlockedFilter,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    out: &mut [u8],
    threads: usize,
) -> Result<(), Error> {
    no_scale(epilogue, "blocked")?;
    let out_dims = check_problem(conv, x.layout, &w.oihw, epilogue, y)?;
    if w.groups != conv.groups {
        return Err(Error::Unsupported(format!(
            "the filter was packed for {} groups, the convolution has {}",
            w.groups, conv.groups
        )));
    }
    if let Some(why) = conv2d_blocked_unsupported(&x, w) {
        return Err(Error::Unsupported(why));
    }
    crate::check_buffers(x.layout, x.data, y, out, &CastSpec::identity(DType::F32))?;
    let pool = if threads > 1 {
        Some(pool(threads)?)
    } else {
        None
    };
    let [n, o, oh, ow] = [0, 1, 2, 3].map(|i| out_dims.entries()[i].1);
    if pointwise::applies(conv, x.layout, y, w) {
        let x = f32s(x.data);
        return pointwise::convolve(
            &x,
            w,
            epilogue,
            [n, o, oh, ow],
            out,
            threads,
            pool.as_deref(),
        );
    }
    let (lanes, tables, row_tables) = w.kernels.tables();
    let [_, cg, kh, kw] = [0, 1, 2, 3].map(|i| w.oihw.extents()[i]);
    let (groups, og) = (conv.groups, o / conv.groups);
    let xd = x.layout.dims();
    // Extents by axis letter (`dims()` lists them in the layout's order).
    let dim = |i: usize| {
        layoutkit_core::Axis::from_letter(['N', 'C', 'H', 'W'][i])
            .and_then(|a| xd.get(a))
            .unwrap_or(0)
    };
    let xa = activation(x.layout);
    let xv = f32s(x.data);
    let source = Source {
        data: &xv,
        sn: xa.sn,
        sh: xa.sh,
        sw: xa.sw,
        chan: xa.chan,
        dims: [dim(0), dim(1), dim(2), dim(3)],
    };
    // A padded (or strided 1x1) copy that row bands make for themselves (see
    // `schedule::BandCopies`) where the tiles would read it in row bands anyway (one group,
    // input outweighing the filter) and there is a copy to make (not 1x1 at stride 1).
    let [oh0, ow0] = [2, 3].map(|i| out_dims.entries()[i].1);
    let row = 2 * lanes;
    let row_bytes = ow0 * conv.stride[1] * conv.stride[0] * cg * 4;
    let blocks = Blocks::new(og, lanes);
    let filter_bytes = blocks.pairs * kh * kw * cg * row * 4;
    let sub = packing::subsamples(conv, [kh, kw]);
    let band_copy = groups == 1
        && (sub || !packing::reads_in_place(&source, conv))
        && ((kh, kw) != (1, 1) || conv.stride != [1, 1])
        && schedule::bands_win(dim(0) * oh0 * row_bytes, filter_bytes, threads, true);
    let (input, band_copies) = if band_copy {
        // Lines of the copy per output row, and the lines one output row's taps span.
        let (padded, per_row, stride) = if sub {
            let p = Padded::new(source.dims, [0, 0], conv.stride, lanes);
            (p, 1, [1, 1])
        } else {
            let p = Padded::new(source.dims, conv.padding, [1, 1], lanes);
            (p, conv.stride[0], conv.stride)
        };
        let span = (kh - 1) * conv.dilation[0] + 1;
        let (band, per_range) = BandCopies::sizes(row_bytes, dim(0), oh0, blocks.pairs, threads);
        let plane = BandCopies::plane_for(&padded, band, per_row, span);
        let input = Input {
            data: std::borrow::Cow::Borrowed(&[][..]),
            sn: 0,
            sh: padded.line(),
            sw: padded.blk,
            chan: padded.chan(plane),
            width: padded.wp,
            stride,
        };
        let copies = BandCopies {
            src: source,
            padded,
            n: dim(0),
            oh: oh0,
            ow: ow0,
            st: per_row,
            span,
            band,
            per_range,
            plane,
        };
        (input, Some(copies))
    } else {
        let input = prepare_input(
            source,
            conv,
            [kh, kw],
            lanes,
            pool.as_deref(),
            take_scratch(),
        );
        (input, None)
    };
    // Output: y in place, or an NCHW<lanes>c buffer converted afterwards.
    let direct = out_map(y, groups, og, lanes);
    let unwritten = direct
        .as_ref()
        .and_then(|m| unwritten_slots(y, m, lanes, o));
    let internal = match direct {
        Some(_) => None,
        None => Some(parse_format(&format!("NCHW{lanes}c"))?.shaped(&out_dims)?),
    };
    let map = match (direct, &internal) {
        (Some(m), _) => Some(m),
        (None, Some(l)) => {
            let a = activation(l);
            let vectors = o.div_ceil(lanes);
            Some(OutMap {
                sn: a.sn,
                sh: a.sh,
                sw: a.sw,
                vec: (0..vectors).map(|v| v * lanes * oh * ow).collect(),
                tail: 0,
                tail_pad: false,
            })
        }
        _ => None,
    }
    .ok_or_else(|| Error::Unsupported("no output addressing".into()))?;
    // Every element of the internal output is written by a tile (padded lanes included).
    let mut scratch: Vec<f32> = match &internal {
        Some(l) => {
            let mut v = take_scratch();
            v.resize(l.elements(), 0.0);
            v
        }
        None => Vec::new(),
    };
    // SAFETY: `out` holds f32 values (checked length); an unaligned buffer is refused.
    let (head, out32, tail) = unsafe { out.align_to_mut::<f32>() };
    let yptr = match &internal {
        Some(_) => Shared(scratch.as_mut_ptr()),
        None if head.is_empty() && tail.is_empty() => Shared(out32.as_mut_ptr()),
        None => {
            return Err(Error::Unsupported(
                "the output buffer is not aligned to 4 bytes".into(),
            ))
        }
    };

    // Geometry in the prepared input: padding is applied there (or was 0), so every tap of
    // every output pixel lies inside it.
    let [st, sw] = input.stride;
    let [dh, dw] = conv.dilation;
    // Reduction chunks (as the filter was packed): channels `k0..k1`, and per tap the input
    // offset and the offset of the tap's rows in the chunk's panel.
    let chunks: Vec<(usize, usize)> = (0..cg)
        .step_by(w.kc)
        .map(|k0| (k0, (k0 + w.kc).min(cg)))
        .collect();
    let mut chunk_taps: Vec<Vec<(usize, usize)>> = chunks
        .iter()
        .map(|&(k0, k1)| {
            (0..kh * kw)
                .map(|t| {
                    let (r, s) = (t / kw, t % kw);
                    (r * dh * input.sh + s * dw * input.sw, t * (k1 - k0) * row)
                })
                .collect()
        })
        .collect();
    // 1x1, stride 1: the output rows are one run of pixels when both sides store rows
    // back to back, so tiles span row ends.
    let flat = kh == 1 && kw == 1 && input.stride == [1, 1] && {
        input.sh == input.width * input.sw && map.sh == ow * map.sw
    };
    // Tiles with the pixel stride built in where it is one or two vectors.
    let psx = sw * input.sw;
    let stride_index = match psx {
        p if p == lanes => 1,
        p if p == 2 * lanes => 2,
        _ => 0,
    };
    let (table, row_table) = (tables[stride_index], row_tables[stride_index]);
    let p_max = table.len();
    // Rows: (input offset, output offset, pixels).
    let group_px = packing::group_pixels(lanes);
    let mut rows: Vec<(usize, usize, usize)> = Vec::new();
    for ni in 0..n {
        if flat {
            let total = oh * ow;
            let chunk = 8 * p_max;
            for start in (0..total).step_by(chunk) {
                rows.push((
                    ni * input.sn + start * input.sw,
                    ni * map.sn + start * map.sw,
                    chunk.min(total - start),
                ));
            }
        } else {
            for r in 0..oh {
                let row = (
                    ni * input.sn + r * st * input.sh,
                    ni * map.sn + r * map.sh,
                    ow,
                );
                schedule::push_row(&mut rows, row, psx, map.sw, group_px, p_max);
            }
        }
    }
    // Channel runs per (group, chunk): channels whose addresses step by `sc`.
    let sc = if input.chan.len() > 1 {
        input.chan[1] - input.chan[0]
    } else {
        1
    };
    let mut runs: Vec<Vec<Vec<Run>>> = (0..groups)
        .map(|g| {
            chunks
                .iter()
                .map(|&(k0, k1)| {
                    let mut v: Vec<Run> = Vec::new();
                    for c in k0..k1 {
                        let off = input.chan[g * cg + c];
                        match v.last_mut() {
                            Some(r) if off == r.x_off + r.count * sc => r.count += 1,
                            _ => v.push(Run {
                                x_off: off,
                                chan: c - k0,
                                count: 1,
                            }),
                        }
                    }
                    v
                })
                .collect()
        })
        .collect();
    // Where one chunk holds all of a pixel's channels in one run and the next pixel follows
    // at once (a first layer of 3 channels, padded as NHWC), the taps of a filter row are
    // one run too: `kw * cg` floats of input and as many panel rows, back to back. The tile
    // then loops over `kh` taps of `kw * cg` steps instead of `kh * kw` taps of `cg`.
    if kw > 1 && dw == 1 && chunks.len() == 1 && sc == 1 && input.sw == cg {
        if let [only] = &mut runs[..] {
            if let [run] = &mut only[0][..] {
                run.count = kw * cg;
                chunk_taps[0] = (0..kh)
                    .map(|r| (r * dh * input.sh, r * kw * cg * row))
                    .collect();
            }
        }
    }
    let mut bias = vec![0f32; groups * blocks.pairs * row];
    if let Some(b) = epilogue.bias {
        for g in 0..groups {
            for l in 0..og {
                bias[(g * blocks.pairs + l / row) * row + l % row] = b[g * og + l] as f32;
            }
        }
    }
    let panels = f32s(&w.panels);
    let tiles = schedule::Tiles {
        table,
        row_table,
        chunks: &chunks,
        chunk_taps: &chunk_taps,
        runs: &runs,
        sc,
        psx,
        map: &map,
        bias: &bias,
        blocks,
        group_px,
        panels: &panels,
        panel: kh * kw * cg * row,
        taps: kh * kw,
        row,
        relu: epilogue.relu,
        y: yptr,
        groups,
    };
    match &band_copies {
        Some(b) => b.run(&tiles, pool.as_deref()),
        None => {
            let row_bytes = rows.first().map_or(1, |r| r.2) * sw * st * cg * 4;
            let bands = schedule::bands_win(rows.len() * row_bytes, filter_bytes, threads, false);
            // SAFETY: every tap of every row's pixels lies inside the prepared input (the
            // output extents follow from it), the rows' vectors inside the output (direct:
            // whole vectors of real channels; else the padded scratch).
            unsafe {
                schedule::run_rows(
                    &tiles,
                    &rows,
                    input.data.as_ptr(),
                    bands,
                    row_bytes,
                    threads,
                    pool.as_deref(),
                )
            };
        }
    }
    if let Some((block, from)) = unwritten {
        // Zeros in the padding slots no tile wrote (`N, C/x, H, W, x`: an image is `blocks`
        // planes of `oh * ow` records of `block` floats).
        // SAFETY: the direct map writes `out` as f32 (aligned above).
        let (_, out32, _) = unsafe { out.align_to_mut::<f32>() };
        let blocks = o.div_ceil(block);
        for image in out32.chunks_exact_mut(blocks * oh * ow * block) {
            for record in image[(blocks - 1) * oh * ow * block..].chunks_exact_mut(block) {
                record[from..].fill(0.0);
            }
        }
    }
    if let Some(l) = &internal {
        let plan = ConversionPlan::new(l, y)?;
        // SAFETY: every bit pattern is a valid byte.
        let (_, bytes, _) = unsafe { scratch.align_to::<u8>() };
        convert_fast(&plan, bytes, out, &CastSpec::identity(DType::F32), threads)?;
    }
    give_scratch(scratch);
    if let std::borrow::Cow::Owned(v) = input.data {
        give_scratch(v);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;

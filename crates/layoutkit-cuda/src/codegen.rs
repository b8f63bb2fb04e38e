//! CUDA C source for a conversion plan: one kernel per region of the plan. Pure string
//! generation, testable without a GPU.
//!
//! * A region whose innermost loop is contiguous in the destination and which has a loop
//!   contiguous in the source (a transposition) gets a tiled kernel: tiles of about 1024
//!   elements staged through shared memory, so both the reads and the writes are coalesced,
//!   with 16-byte or paired accesses where alignment allows. Into 1-byte elements (int8, and
//!   float -> int8 casts) the tile is transposed in registers a 4-byte word at a time, padding
//!   after its rows included, where rows start on whole vectors (`tile_words.rs`). Where one
//!   side of the transposition is 2-4 cells (a pixel's 3 channels), each thread moves its
//!   pixels in registers (`tile_thin.rs`). Small
//!   transpositions take several outer steps per tile, and compound rows of many channels
//!   their columns as steps (`tile_steps.rs`).
//! * Every other copy region gets an element kernel (one thread per element, consecutive
//!   threads on the innermost loop), and padding gets a fill kernel.
//! * Plans with padding, or with regions whose innermost runs are short, get one gather over
//!   the whole destination instead (each lane writes whole 16-byte chunks).
//! * Casts happen in the same pass, with the CPU reference's exact rounding (written out with
//!   integer operations where CUDA's intrinsics could treat NaN payloads differently).

use std::fmt::Write;

use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::{ConversionPlan, LoopDim, Region, Strategy};
use layoutkit_core::tiling;
use layoutkit_core::{CastSpec, DType};

use crate::Error;

mod gather;
mod tile;
mod tuning;
use gather::{fill_kernel, gather_kernel, runs_kernel};
use tile::{tile_kernel, TileJob};
pub use tuning::Tuning;

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub source: String,
    pub name: &'static str,
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
}

/// Elements per thread in the gather kernel.
const PER_THREAD: usize = 4;

/// Short runs (destination runs of fewer elements than this) make a region a `runs` region.
const SHORT_RUN: usize = 16;

/// The fewest elements a transposition moves per outer step for a tile kernel (one thread
/// block per tile) in a region of [`MANY_TILES_ELEMENTS`] or more; smaller ones go to the
/// `runs` kernel or the gather. Measured on an H200 (whole CUDA sweep, 32 MiB tensors): MACE
/// filter images of 12-36 elements per step 2-13% of the device copy as tiles, 57-108% through
/// the gather; OIHW16i16o of 144 (I = 1, 3x3) 83% as tiles, 48% through the gather; with the
/// limit at 256 for every size, tensors under 1 MiB within 1.5x of an empty launch went 591 ->
/// 578 of 796 (a small tensor has few tiles, one launch either way).
const MIN_TILE_ELEMENTS: usize = 128;

/// Regions of fewer elements keep their tile kernel whatever its size (see
/// [`MIN_TILE_ELEMENTS`]).
const MANY_TILES_ELEMENTS: usize = 1 << 20;

/// Cells of the whole transposition of `axes` (all its source- and destination-contiguous
/// loops), the most one tile can hold.
fn tile_cells(axes: &tiling::TileAxes) -> usize {
    axes.a.iter().map(|l| l.extent).product::<usize>() * axes.b.extent
}

/// Elements by which the source and destination buffers start past a 16-byte boundary (a
/// framework's tensor view that starts mid-vector). The kernels are generated for buffers
/// moved back to that boundary, with every offset of the plan moved on as far, so each vector
/// access they choose is aligned in memory, not only within the buffer. `0, 0`: buffers that
/// start on a boundary (every allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BufferShift {
    /// Source elements before the first source element, back to the boundary.
    pub src: usize,
    /// Destination elements before the first destination element, back to the boundary.
    pub dst: usize,
}

/// The launches that run `plan` with `cast`. Errors for plans without regions (blocks that do
/// not nest) and for casts the backend does not do.
pub fn generate(plan: &ConversionPlan, cast: &CastSpec) -> Result<Vec<Launch>, Error> {
    generate_tuned(plan, cast, &Tuning::default())
}

/// [`generate`] with kernel knobs other than the defaults.
pub fn generate_tuned(
    plan: &ConversionPlan,
    cast: &CastSpec,
    tuning: &Tuning,
) -> Result<Vec<Launch>, Error> {
    generate_shifted(plan, cast, tuning, BufferShift::default())
}

/// [`generate_tuned`] for buffers that start `shift` elements past a 16-byte boundary; the
/// kernels are launched with the buffers' addresses moved back by as many elements (see
/// [`BufferShift`]) and never touch those elements.
///
/// Each copy region becomes a tile kernel when it is a transposition (of elements, or of units:
/// short runs contiguous in both layouts), and a `runs` kernel when its destination runs are
/// short or followed by padding (data and padding stored together); the padding that completes
/// a copy's runs is written by that copy's kernel. When such short-run regions, or fills that
/// complete nothing, make more than a sixteenth of the destination, one gather over the whole
/// destination runs instead (coalesced writes of data and padding alike).
pub fn generate_shifted(
    plan: &ConversionPlan,
    cast: &CastSpec,
    tuning: &Tuning,
    shift: BufferShift,
) -> Result<Vec<Launch>, Error> {
    let Strategy::Regions { copies, fills } = plan.strategy() else {
        return Err(Error::Unsupported(format!(
            "{} -> {}: the blocks do not nest (no linear plan); use the CPU",
            plan.src().layout(),
            plan.dst().layout()
        )));
    };
    check_cast(cast)?;
    let small = plan.src().elements() < (1 << 31) && plan.dst().elements() < (1 << 31);
    let size = cast.src.size_bytes().max(cast.dst.size_bytes());
    // Fills keep their source offset of 0 (they read nothing).
    let moved = |rs: &[Region], by_src: usize| -> Vec<Region> {
        rs.iter()
            .map(|r| Region {
                src_offset: r.src_offset + by_src,
                dst_offset: r.dst_offset + shift.dst,
                dims: r.dims.clone(),
            })
            .collect()
    };
    let (copies, fills) = (moved(copies, shift.src), moved(fills, 0));
    let (padded, rest) = tiling::absorb_fills(&copies, &fills, tiling::FillRuns::Runs);
    let mut out = Vec::new();
    // Destination elements written by runs kernels and by fill kernels.
    let mut scattered = 0usize;
    let mut done = vec![false; padded.len()];
    for (i, pc) in padded.iter().enumerate() {
        if done[i] {
            continue;
        }
        done[i] = true;
        let r = pc.region;
        let inner = r.inner();
        let (unit, dims) = tiling::split_unit(&r.dims, (16 / size).max(1));
        let axes = tiling::tile_axes(&dims, unit);
        let identity = cast.src == cast.dst;
        let job = |axes: tiling::TileAxes, a_tail: usize| TileJob {
            src_offset: r.src_offset,
            dst_offset: r.dst_offset,
            axes,
            unit,
            b_pad: pc.pad,
            a_tail,
            cast,
            small,
            tuning: *tuning,
        };
        // Padded rows are written by the tile in every cast: rows of up to 256 elements with
        // their padding by any tile (the casts into 2-byte elements of `NCHW -> NCHW32c`
        // went to the gather, f32 -> f16 0.52-0.80 of the device copy on an H200), longer
        // rows of 1-byte elements by the word tile. With a cast, not a region of a
        // sixteenth of the destination or less (the last 8 channels of 1000 into 32-channel
        // blocks: a launch of its own over few blocks ran 0.85-0.99x the one gather, H200).
        let words = pc.pad > 0
            && axes
                .as_ref()
                .is_some_and(|ax| tile::takes_words(&job(ax.clone(), 0)));
        match axes {
            // A tile; its padding written with it where it continues the tile's rows. Not
            // when a large region's whole transposition is a handful of elements per outer
            // step (a MACE filter image with 3 inputs and 1x1 taps: 3 x 4 cells), since each
            // tile is one thread block: a block of 256 threads then moved 12 elements.
            Some(axes)
                if (pc.pad == 0
                    || words
                    || (unit == 1
                        && inner.extent + pc.pad <= 256
                        && (identity || span(r, pc.pad) * 16 > plan.dst().elements())))
                    && (tile_cells(&axes) * unit >= MIN_TILE_ELEMENTS
                        || r.elements() < MANY_TILES_ELEMENTS) =>
            {
                let tail = if tuning.merge_tails
                    && identity
                    && pc.pad == 0
                    && unit > 1
                    && axes.a.len() == 1
                {
                    tiling::tail_cell(r, &axes, unit, &padded, &done)
                } else {
                    None
                };
                let a_tail = tail.map_or(0, |(j, run)| {
                    done[j] = true;
                    run
                });
                out.push(tile_kernel(&job(axes, a_tail)));
            }
            _ if pc.pad == 0 && inner.extent >= SHORT_RUN => {
                out.push(copy_kernel(r, cast, small)?);
            }
            _ if inner.dst_stride == 1 && inner.extent + pc.pad <= 64 => {
                scattered += r.elements() / inner.extent.max(1) * (inner.extent + pc.pad);
                out.push(runs_kernel(r, pc.pad, cast, small));
            }
            _ => return Ok(vec![gather_kernel(plan, cast, shift)]),
        }
    }
    for f in rest {
        scattered += f.elements();
        out.push(fill_kernel(f, cast)?);
    }
    if scattered * 16 > plan.dst().elements() {
        return Ok(vec![gather_kernel(plan, cast, shift)]);
    }
    Ok(out)
}

/// Destination elements of region `r` with `pad` fill elements after each innermost run.
fn span(r: &Region, pad: usize) -> usize {
    let inner = r.inner().extent.max(1);
    r.elements() / inner * (inner + pad)
}

fn check_cast(c: &CastSpec) -> Result<(), Error> {
    use DType::*;
    let ok = c.src == c.dst
        || matches!(
            (c.src, c.dst),
            (F32, F16)
                | (F16, F32)
                | (F32, BF16)
                | (BF16, F32)
                | (F32, I8)
                | (F32, U8)
                | (I8, F32)
                | (U8, F32)
        );
    if ok {
        Ok(())
    } else {
        Err(Error::Unsupported(format!(
            "the cast {} -> {}",
            c.src, c.dst
        )))
    }
}

/// The index type of a kernel and its literals' suffix: 32-bit where every offset fits
/// (`small`), else 64-bit.
fn index_type(small: bool) -> (&'static str, &'static str) {
    if small {
        ("unsigned int", "u")
    } else {
        ("unsigned long long", "ull")
    }
}

/// The C type moving `bytes` (1, 2, 4, 8 or 16) bytes at once.
fn vector_type(bytes: usize) -> &'static str {
    match bytes {
        16 => "uint4",
        8 => "uint2",
        4 => "unsigned int",
        2 => "unsigned short",
        _ => "unsigned char",
    }
}

fn storage(t: DType) -> &'static str {
    match t.size_bytes() {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        _ => "unsigned long long",
    }
}

/// The fill value of `plan`'s destination as the bits of one element of `dtype`.
pub fn fill_bits(plan: &ConversionPlan, dtype: DType) -> u64 {
    let mut b = [0u8; 8];
    Scalar::from_f64(dtype, plan.dst().layout().fill()).write(&mut b);
    u64::from_le_bytes(b)
}

/// Device functions converting a source element (its bits) to a destination element (bits).
fn prelude(c: &CastSpec) -> String {
    let (s, d) = (storage(c.src), storage(c.dst));
    let mut k = String::from("// Generated by layoutkit-cuda.\n");
    let body = if c.src == c.dst {
        "return v;".to_string()
    } else {
        use DType::*;
        match (c.src, c.dst) {
            (F32, F16) => "float x = __uint_as_float(v); unsigned int b = v; unsigned int sign = (b >> 16) & 0x8000u;\n  \
                if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(sign | 0x7c00u | 0x0200u | ((b & 0x007fffffu) >> 13));\n  \
                unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); return h;".into(),
            (F16, F32) => "unsigned int sign = ((unsigned int)v & 0x8000u) << 16; unsigned int e = v & 0x7c00u, m = v & 0x03ffu;\n  \
                if (e == 0x7c00u && m != 0) return sign | 0x7fc00000u | (m << 13);\n  \
                float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(v)); return __float_as_uint(f);".into(),
            (F32, BF16) => "if ((v & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((v >> 16) | 0x0040u);\n  \
                return (unsigned short)((v + 0x7fffu + ((v >> 16) & 1u)) >> 16);".into(),
            (BF16, F32) => "if ((v & 0x7fffu) > 0x7f80u) return ((unsigned int)v | 0x0040u) << 16;\n  return ((unsigned int)v) << 16;".into(),
            (F32, I8) | (F32, U8) => {
                let (lo, hi) = if c.dst == I8 { (-128, 127) } else { (0, 255) };
                let (sc, zp) = (c.quant.scale, c.quant.zero_point);
                format!(
                    "float q = __uint_as_float(v) / {sc:?}f;\n  int zp = {zp};\n  if (isnan(q)) return ({d})min(max(zp, {lo}), {hi});\n  \
                     float cl = fminf(fmaxf(q, -4194304.0f), 4194304.0f);\n  int r = (int)rintf(cl) + zp;\n  return ({d})min(max(r, {lo}), {hi});"
                )
            }
            (I8, F32) | (U8, F32) => {
                let signed = if c.src == I8 { "(int)(signed char)v" } else { "(int)v" };
                let (sc, zp) = (c.quant.scale, c.quant.zero_point);
                format!("return __float_as_uint((float)({signed} - {zp}) * {sc:?}f);")
            }
            _ => "return 0;".into(),
        }
    };
    let _ = writeln!(
        k,
        "__device__ __forceinline__ {d} cast({s} v) {{\n  {body}\n}}"
    );
    k
}

/// `c0 = i / (product of inner extents) % extent`, ... for the loops `dims`, from a linear
/// index `i` (innermost fastest). Returns statements declaring `c0..cn` and the total.
fn decode(k: &mut String, dims: &[LoopDim], i: &str, indent: &str, it: &str, u: &str) {
    let mut inner = 1usize;
    let mut lines = Vec::new();
    for (j, d) in dims.iter().enumerate().rev() {
        let mut e = if inner == 1 {
            i.to_string()
        } else {
            format!("({i} / {inner}{u})")
        };
        if j > 0 {
            e = format!("({e} % {}{u})", d.extent);
        }
        lines.push(format!("{indent}const {it} c{j} = {e};"));
        inner *= d.extent;
    }
    lines.reverse();
    for l in lines {
        let _ = writeln!(k, "{l}");
    }
}

fn offset(dims: &[LoopDim], base: usize, src: bool, u: &str) -> String {
    let mut terms = vec![format!("{base}{u}")];
    for (j, d) in dims.iter().enumerate() {
        let s = if src { d.src_stride } else { d.dst_stride };
        if s != 0 {
            terms.push(format!("c{j} * {s}{u}"));
        }
    }
    terms.join(" + ")
}

fn elements(dims: &[LoopDim]) -> usize {
    dims.iter().map(|d| d.extent).product::<usize>().max(1)
}

fn grid_1d(n: usize, block: usize) -> (u32, u32, u32) {
    (n.div_ceil(block).max(1) as u32, 1, 1)
}

/// Elements per vector when a copy region can move whole vectors: the innermost loop contiguous
/// on both sides, and every extent of it, offset and outer stride a multiple of `v` elements,
/// where `v` makes the wider side's vector 16, else 8, else 4 bytes (the widest that fits, so
/// every vector of the region is aligned when the buffers are: runs of 1000 int8 values 1024
/// bytes apart move 8 bytes at a time). `None` where not even two elements fit a vector. Casts
/// are applied element by element inside the vector (f32 -> f16: four floats in, four halves
/// out).
fn copy_vector(r: &Region, c: &CastSpec) -> Option<usize> {
    let size = c.src.size_bytes().max(c.dst.size_bytes());
    if size >= 16 || r.dims.is_empty() {
        return None;
    }
    let inner = r.inner();
    let outer = &r.dims[..r.dims.len() - 1];
    let fits = |v: usize| {
        inner.src_stride == 1
            && inner.dst_stride == 1
            && inner.extent.is_multiple_of(v)
            && r.src_offset.is_multiple_of(v)
            && r.dst_offset.is_multiple_of(v)
            && outer
                .iter()
                .all(|d| d.src_stride % v as isize == 0 && d.dst_stride % v as isize == 0)
    };
    [16, 8, 4]
        .into_iter()
        .map(|bytes| bytes / size)
        .filter(|&v| v >= 2)
        .find(|&v| fits(v))
}

/// The kernel of a copy region of whole vectors ([`copy_vector`]): one thread per vector. The
/// buffers' own alignment is only known at launch, so the kernel checks it: when both are
/// aligned to their vectors each thread loads one vector, casts its `v` elements and stores one
/// vector, otherwise it moves its `v` elements one by one (a tensor view that starts
/// mid-vector).
fn copy_vector_kernel(r: &Region, c: &CastSpec, small: bool, v: usize) -> Launch {
    let (it, u) = index_type(small);
    let mut dims = r.dims.clone();
    let last = dims.len() - 1;
    dims[last].extent /= v;
    let (s, d) = (storage(c.src), storage(c.dst));
    let (sb, db) = (v * c.src.size_bytes(), v * c.dst.size_bytes());
    let (vs, vd) = (vector_type(sb), vector_type(db));
    let mut k = prelude(c);
    let total = elements(&dims);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void convert(const {s}* __restrict__ src, {d}* __restrict__ dst) {{"
    );
    let _ = writeln!(
        k,
        "  const unsigned long long ig = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;"
    );
    let _ = writeln!(
        k,
        "  if (ig >= {total}ull) return;\n  const {it} i = ({it})ig;"
    );
    // The vector index's loop coordinates; the innermost counts vectors, so it steps v.
    decode(&mut k, &dims, "i", "  ", it, u);
    let _ = writeln!(k, "  const {it} c{last}e = c{last} * {v}{u};");
    let at = |base: usize, src: bool| {
        let mut terms = vec![format!("{base}{u}")];
        for (j, dim) in dims.iter().enumerate() {
            let st = if src { dim.src_stride } else { dim.dst_stride };
            if j == last {
                terms.push(format!("c{j}e"));
            } else if st != 0 {
                terms.push(format!("c{j} * {st}{u}"));
            }
        }
        terms.join(" + ")
    };
    let _ = writeln!(
        k,
        "  const {it} so = {};\n  const {it} d0 = {};",
        at(r.src_offset, true),
        at(r.dst_offset, false)
    );
    let _ = writeln!(
        k,
        "  if ((((unsigned long long)src & {}ull) | ((unsigned long long)dst & {}ull)) == 0ull) {{\n    \
         const {vs} a = reinterpret_cast<const {vs}*>(src)[so / {v}{u}];\n    \
         const {s}* ae = reinterpret_cast<const {s}*>(&a);\n    \
         {vd} b;\n    {d}* be = reinterpret_cast<{d}*>(&b);\n    \
         #pragma unroll\n    for (int j = 0; j < {v}; ++j) be[j] = cast(ae[j]);\n    \
         reinterpret_cast<{vd}*>(dst)[d0 / {v}{u}] = b;\n  \
         }} else {{\n    for (int j = 0; j < {v}; ++j) dst[d0 + j] = cast(src[so + j]);\n  }}",
        sb - 1,
        db - 1
    );
    k.push_str("}\n");
    Launch {
        source: k,
        name: "convert",
        grid: grid_1d(total, 256),
        block: (256, 1, 1),
    }
}

/// The kernel of a copy region that is not a transposition: one thread per element,
/// consecutive threads on the innermost loop (one thread per 16-byte vector where
/// [`copy_vector`] allows).
fn copy_kernel(r: &Region, c: &CastSpec, small: bool) -> Result<Launch, Error> {
    if let Some(v) = copy_vector(r, c) {
        return Ok(copy_vector_kernel(r, c, small, v));
    }
    // Index arithmetic in 32 bits when the tensors fit (cheaper multiplies and divisions).
    let (it, u) = index_type(small);
    let dims = r.loops();
    let (s, d) = (storage(c.src), storage(c.dst));
    let mut k = prelude(c);
    let total = elements(&dims);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void convert(const {s}* __restrict__ src, {d}* __restrict__ dst) {{"
    );
    let _ = writeln!(
        k,
        "  const unsigned long long ig = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;"
    );
    let _ = writeln!(
        k,
        "  if (ig >= {total}ull) return;\n  const {it} i = ({it})ig;"
    );
    decode(&mut k, &dims, "i", "  ", it, u);
    let _ = writeln!(
        k,
        "  dst[{}] = cast(src[{}]);",
        offset(&dims, r.dst_offset, false, u),
        offset(&dims, r.src_offset, true, u)
    );
    k.push_str("}\n");
    Ok(Launch {
        source: k,
        name: "convert",
        grid: grid_1d(total, 256),
        block: (256, 1, 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use layoutkit_core::plan::{LoopDim, Region};

    fn runs(n: usize, run: usize, src: isize, dst: isize) -> Region {
        Region {
            src_offset: 0,
            dst_offset: 0,
            dims: vec![
                LoopDim {
                    extent: n,
                    src_stride: src,
                    dst_stride: dst,
                },
                LoopDim {
                    extent: run,
                    src_stride: 1,
                    dst_stride: 1,
                },
            ],
        }
    }

    /// The widest vector every run of the region fills: 16 bytes, else 8, else 4, else none.
    #[test]
    fn copy_vectors_are_the_widest_the_runs_allow() {
        let same = |t| CastSpec::new(t, t, None).unwrap();
        let f32_to_f16 = CastSpec::new(DType::F32, DType::F16, None).unwrap();
        // (run, source stride, destination stride), cast, elements per vector. The first:
        // int8 NCHW32c -> NCHW with 1x1 planes and C = 1000, runs of 1000 bytes 1024 apart.
        let cases = [
            ((1000, 1024, 1000), same(DType::I8), Some(8)),
            ((1024, 1024, 1024), same(DType::I8), Some(16)),
            ((12, 32, 12), same(DType::I8), Some(4)),
            ((6, 32, 6), same(DType::I8), None),
            ((250, 256, 250), same(DType::F16), Some(2)),
            ((250, 256, 252), same(DType::F32), Some(2)),
            ((251, 256, 251), same(DType::F32), None),
            ((252, 256, 252), same(DType::F32), Some(4)),
            ((252, 256, 252), same(DType::F16), Some(4)),
            ((6, 8, 6), f32_to_f16, Some(2)),
        ];
        for ((run, src, dst), cast, want) in cases {
            assert_eq!(
                copy_vector(&runs(9, run, src, dst), &cast),
                want,
                "runs of {run}, strides {src} / {dst}, {cast:?}"
            );
        }
    }
}

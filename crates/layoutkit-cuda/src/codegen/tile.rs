//! The transposition kernel: one thread block moves one tile of a region through shared
//! memory, reading whole source rows and writing whole destination rows.
//!
//! A tile holds `TA x TB` cells of `unit` elements (a unit is a short run contiguous in both
//! layouts, such as the four lanes of a MACE image pixel; 1 for a plain transposition). Cells
//! along `a` are contiguous in the source, cells along `b` in the destination, so a source row
//! of the tile is `TA * unit` consecutive elements and a destination row `TB * unit`.
//!
//! Padding is written in the same pass where it continues the tile's rows: fill elements after
//! every destination row (`b_pad`: the five padding channels after the three data channels of
//! a `kHWC8` pixel), and one more, partial cell after the last along `a`, completed with fill
//! (`a_tail`: the last, half-empty pixel of a MACE image row, whose two channels end the
//! NHWC source row). The partial cell is read after the tile's main loop, by one thread per
//! row: a branch inside the unrolled loop keeps its loads from being issued together.
//!
//! The kernel is written for few instructions per element, since the conversions that fell
//! short of the copy were limited by issued instructions, not by memory
//! (`bench/convert_profile.py`): each thread moves vectors at a fixed column of the tile and
//! steps down its rows by a constant (the loops are unrolled); bounds are tested once per
//! vector; the destination offset of each tile row (a sum of divisions when the source side is
//! a compound index, as in `OIHW16i16o`) is computed once per block into a shared table.

use std::fmt::Write;

use layoutkit_core::plan::LoopDim;
use layoutkit_core::tiling::TileAxes;
use layoutkit_core::CastSpec;

use super::{decode, elements, offset, prelude, storage, vector_type, Launch, Tuning};

#[path = "tile_flat.rs"]
mod flat;
use flat::{FlatRead, FlatWrite, Shared};
#[path = "tile_words.rs"]
mod words;
use words::WordTile;

/// Threads per block.
const THREADS: usize = 256;

/// The most static shared memory a tile kernel declares (CUDA's static limit is 48 KiB).
const SHARED_BYTES: usize = 44 * 1024;

/// What a tile kernel moves: the region's offsets, its tile axes and unit, the padding it
/// writes, and the cast.
pub(super) struct TileJob<'a> {
    pub src_offset: usize,
    pub dst_offset: usize,
    pub axes: TileAxes,
    pub unit: usize,
    /// Fill elements after each destination row (needs `unit == 1`, an identity cast, and the
    /// whole of `b` in one tile).
    pub b_pad: usize,
    /// Elements (1..unit) of one more, partial cell after the last cell along `a`, read from
    /// the source right after it; the rest of that cell is fill (needs an identity cast and a
    /// single source-contiguous loop).
    pub a_tail: usize,
    pub cast: &'a CastSpec,
    /// 32-bit index arithmetic (both tensors under 2^31 elements).
    pub small: bool,
    pub tuning: Tuning,
}

/// Tile edge in elements by element size: a warp's row of the tile spans 128 bytes or more.
fn tile_edge(size: usize) -> usize {
    match size {
        1 => 128,
        2 => 64,
        _ => 32,
    }
}

/// The tile's extent in cells along `a` (`a_cells` source-contiguous cells) and along `b`.
///
/// Plain transpositions (single elements, one source loop), or `tile_elements == 0`: about
/// edge^2 elements, rectangular when one side is short, and enough 16-byte vectors of the
/// narrower type for every thread. Tiles of units or of compound source rows: destination rows
/// of up to 1 KiB, then a power of two of source cells, as many as fit in `tile_elements`
/// elements (powers of two measured faster than even splits or whole 16i x 16o blocks on the
/// H200, `bench/results/gpu.md`).
fn tile_shape(
    a_cells: usize,
    b_cells: usize,
    unit: usize,
    compound: bool,
    sizes: (usize, usize),
    tile_elements: usize,
) -> (usize, usize) {
    let (ssize, dsize) = sizes;
    if tile_elements > 0 && (unit > 1 || compound) {
        let most = 1024 / (unit * dsize);
        let tb = b_cells.div_ceil(b_cells.div_ceil(most.max(1)));
        let fit = (tile_elements / (tb * unit)).max(1);
        let mut ta = 1;
        while ta * 2 <= fit && ta < a_cells {
            ta *= 2;
        }
        return (ta.min(a_cells), tb);
    }
    let edge = tile_edge(ssize.max(dsize));
    let elements = (edge * edge).max(THREADS * 16 / ssize.min(dsize));
    let area = (elements / unit).max(1);
    let mut tb = b_cells.next_power_of_two().clamp(1, edge);
    let ta = (area / tb).min(a_cells.next_power_of_two()).max(1);
    tb = (area / ta).min(b_cells.next_power_of_two()).max(1);
    (ta.min(a_cells), tb.min(b_cells))
}

/// Padding cells after each shared row of `ta` cells. Plain transpositions: one element, so a
/// column of the tile spreads over the banks. Tiles of units: an odd number of cells per row,
/// so the cells that the lanes of a warp read (one per row) fall in different banks.
fn row_padding(ta: usize, unit: usize) -> usize {
    if unit == 1 || ta.is_multiple_of(2) {
        1
    } else {
        2
    }
}

/// The widest vector (in elements of `size` bytes, at most `max_bytes`) dividing every value.
fn widest(size: usize, max_bytes: usize, values: &[isize]) -> usize {
    let mut v = (max_bytes / size).max(1);
    while v > 1 && values.iter().any(|x| x % v as isize != 0) {
        v /= 2;
    }
    v
}

/// Whether `job` takes a word tile (1-byte destinations transposed in registers), which also
/// writes the padding after its destination rows when the region casts.
pub(super) fn takes_words(job: &TileJob) -> bool {
    WordTile::of(job, &job.axes.a, &job.axes.b).is_some()
}

/// The launch moving `job`'s region: named `convert` (source, destination) without padding,
/// `tile` (source, destination, fill value) with it.
pub(super) fn tile_kernel(job: &TileJob) -> Launch {
    let c = job.cast;
    let (it, u) = super::index_type(job.small);
    let (s, d) = (storage(c.src), storage(c.dst));
    let (ssize, dsize) = (c.src.size_bytes(), c.dst.size_bytes());
    let unit = job.unit;
    let TileAxes { outer, a, b } = &job.axes;
    if let Some(w) = WordTile::of(job, a, b) {
        return w.kernel(job, &a[0], b);
    }
    let padded = job.b_pad > 0 || job.a_tail > 0;
    assert!(
        !padded || c.src == c.dst,
        "padding in tiles needs an identity cast"
    );
    // The source-contiguous loops innermost first; `full` whole cells along them, `a_cells`
    // with the partial tail cell.
    let group: Vec<LoopDim> = a.iter().rev().copied().collect();
    let full: usize = group.iter().map(|g| g.extent).product();
    let a_cells = full + usize::from(job.a_tail > 0);
    let b_cells = b.extent;
    let (ta, tb) = tile_shape(
        a_cells,
        b_cells,
        unit,
        group.len() > 1,
        (ssize, dsize),
        job.tuning.tile_elements,
    );
    let (mut ta, tb) = if job.b_pad > 0 {
        (ta, b_cells)
    } else {
        (ta, tb)
    };
    // Static shared memory is limited to 48 KiB: halve the rows until the tile and its row
    // table fit (only wide elements with a whole padded destination row in the tile come near).
    let index_bytes = if job.small { 4 } else { 8 };
    let shared = |ta: usize| tb * (ta + row_padding(ta, unit)) * unit * ssize + ta * index_bytes;
    while ta > 1 && shared(ta) > SHARED_BYTES {
        ta /= 2;
    }
    // A destination row: `tb` cells of data, then the padding.
    let drow = tb * unit + job.b_pad;
    // The tile's source rows keep the read vector a power-of-two tile allows.
    let keep = widest(ssize, job.tuning.read_bytes, &[(ta * unit) as isize]);
    let order = write_order(&group, ta, drow, keep, job);
    if let Some(WriteOrder { rows, .. }) = order {
        ta = rows;
    }
    let (na, nb) = (a_cells.div_ceil(ta), b_cells.div_ceil(tb));
    let blocks = na * nb * elements(outer);

    // Vectors: every row start and every row length (whole tensor and tile) a multiple.
    let mut src_vals = vec![job.src_offset as isize, b.src_stride];
    src_vals.extend(outer.iter().map(|l| l.src_stride));
    src_vals.extend([(ta * unit) as isize, (full * unit) as isize]);
    let vr = widest(ssize, job.tuning.read_bytes, &src_vals);
    // Flat reads where the tile's source rows lie back to back (see `FlatRead`).
    let flat = FlatRead::of(job, (ta, tb), full, b.src_stride, (vr, ssize));
    let mut dst_vals = vec![job.dst_offset as isize];
    dst_vals.extend(outer.iter().map(|l| l.dst_stride));
    dst_vals.extend(group.iter().map(|g| g.dst_stride));
    dst_vals.extend([drow as isize, (b_cells * unit + job.b_pad) as isize]);
    let vw = widest(dsize, job.tuning.write_bytes, &dst_vals);

    // Flat writes where the tile's destination rows lie back to back (see `FlatWrite`).
    let whole_rows = unit == 1 && job.b_pad == 0 && job.a_tail == 0 && tb == b_cells;
    let flat_write = if whole_rows && order.is_none() {
        FlatWrite::of(&group, drow, vw, dsize, job.tuning.write_bytes)
    } else {
        None
    };

    let row = (ta + row_padding(ta, unit)) * unit;
    let mut k = prelude(c);
    let (name, fill_param) = if padded {
        ("tile", format!(", {d} fill"))
    } else {
        ("convert", String::new())
    };
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void {name}(const {s}* __restrict__ src, {d}* __restrict__ dst{fill_param}) {{"
    );
    match flat {
        Some(f) => {
            let _ = writeln!(
                k,
                "  __shared__ __align__(16) {s} smf[{}];",
                f.shared_elements(tb)
            );
        }
        None => {
            let _ = writeln!(k, "  __shared__ __align__(16) {s} sm[{tb}][{row}];");
        }
    }
    if flat_write.is_none() {
        let _ = writeln!(k, "  __shared__ {it} rowoff[{ta}];");
    }
    let _ = writeln!(k, "  const {it} blk = blockIdx.x;");
    let _ = writeln!(
        k,
        "  const {it} tb = blk % {nb}{u}, ta = (blk / {nb}{u}) % {na}{u}, o = blk / {}{u};",
        na * nb
    );
    decode(&mut k, outer, "o", "  ", it, u);
    let _ = writeln!(
        k,
        "  const {it} sbase = {}, dbase = {};",
        offset(outer, job.src_offset, true, u),
        offset(outer, job.dst_offset, false, u)
    );
    let _ = writeln!(k, "  const {it} a0 = ta * {ta}{u}, b0 = tb * {tb}{u};");
    let _ = writeln!(k, "  const unsigned int tid = threadIdx.x;");
    // The destination offset of each tile row (cell `ia` of the compound source index).
    if flat_write.is_none() {
        let _ = writeln!(
            k,
            "  for (unsigned int r = tid; r < {ta}u; r += {THREADS}u) {{\n    const {it} ia = a0 + r;"
        );
        let _ = writeln!(k, "    rowoff[r] = {};\n  }}", row_offset(&group, u));
    }

    if let Some(f) = flat {
        f.read(&mut k, (tb, b_cells), it, u);
    } else {
        // Read: source rows (one per b cell) of `ta * unit` elements, `vr` at a time.
        let rv = (ta * unit).div_ceil(vr);
        let svt = vector_type(vr * ssize);
        let (col, step) = walk(rv, vr);
        let _ = writeln!(
            k,
            "  #pragma unroll\n  for (unsigned int i = 0; i < {}u; ++i) {{",
            (rv * tb).div_ceil(THREADS)
        );
        // One flat test per vector (nested branches measured slower: the loads of the unrolled
        // steps are then not issued together).
        let _ = writeln!(k, "    const unsigned int lb = {step}, j = {col};");
        let _ = writeln!(k, "    const {it} ea = a0 * {unit}{u} + j;");
        let row_ok = format!("{}b0 + lb < {b_cells}{u}", guard(rv * tb));
        let _ = writeln!(
            k,
            "    if ({row_ok} && ea + {vr}u <= {}{u}) {{\n      union {{ {s} e[{vr}]; {svt} q; }} r;\n      r.q = *(const {svt}*)(src + sbase + ea + (b0 + lb) * {}{u});",
            full * unit,
            b.src_stride
        );
        if row.is_multiple_of(vr) && vr > 1 {
            let _ = writeln!(k, "      *({svt}*)&sm[lb][j] = r.q;");
        } else {
            let _ = writeln!(
                k,
                "      #pragma unroll\n      for (int e = 0; e < {vr}; ++e) sm[lb][j + e] = r.e[e];"
            );
        }
        k.push_str("    }\n  }\n");
    }
    if job.a_tail > 0 {
        let _ = writeln!(
            k,
            "  if (a0 + {ta}{u} > {full}{u}) {{\n    const unsigned int col = ({full}{u} - a0) * {unit}u;\n    for (unsigned int lb = tid; lb < {tb}u; lb += {THREADS}u) {{\n      if (b0 + lb < {b_cells}{u}) {{\n        const {s}* p = src + sbase + {}{u} + (b0 + lb) * {}{u};\n        #pragma unroll\n        for (int e = 0; e < {unit}; ++e) sm[lb][col + e] = e < {} ? p[e] : fill;\n      }}\n    }}\n  }}",
            full * unit,
            b.src_stride,
            job.a_tail
        );
    }
    k.push_str("  __syncthreads();\n");

    let cell = match flat {
        Some(f) => Shared::Flat { row: f.row },
        None => Shared::Rows { row },
    };
    if let Some(f) = flat_write {
        f.write(&mut k, d, (ta, a_cells), cell.at(unit), it, u);
    } else {
        // Write: destination rows (one per a cell) of `drow` elements, `vw` at a time.
        let wv = drow / vw;
        let dvt = vector_type(vw * dsize);
        let (col, step) = walk(wv, vw);
        let _ = writeln!(
            k,
            "  #pragma unroll\n  for (unsigned int i = 0; i < {}u; ++i) {{",
            (wv * ta).div_ceil(THREADS)
        );
        match order {
            Some(WriteOrder {
                inner, outer: m, ..
            }) => {
                let _ = writeln!(
                    k,
                    "    const unsigned int lw = {step}, la = (lw % {m}u) * {inner}u + lw / {m}u, j = {col};"
                );
            }
            None => {
                let _ = writeln!(k, "    const unsigned int la = {step}, j = {col};");
            }
        }
        let _ = writeln!(
            k,
            "    if ({}a0 + la < {a_cells}{u} && b0 * {unit}{u} + j + {vw}u <= {}{u}) {{",
            guard(wv * ta),
            b_cells * unit + job.b_pad
        );
        let _ = writeln!(k, "      union {{ {d} e[{vw}]; {dvt} q; }} w;");
        read_cells(&mut k, s, unit, vw, ssize, cell, tb * unit, job.b_pad > 0);
        let _ = writeln!(
            k,
            "      *({dvt}*)(dst + dbase + rowoff[la] + b0 * {unit}{u} + j) = w.q;\n    }}\n  }}"
        );
    }
    k.push_str("}\n");
    Launch {
        source: k,
        name: if padded { "tile" } else { "convert" },
        grid: (blocks.max(1) as u32, 1, 1),
        block: (THREADS as u32, 1, 1),
    }
}

/// The order in which a tile's destination rows are written when it is not the source's: the
/// tile of `rows` compound source cells is `outer` steps of the second source loop by `inner`
/// (the first loop's whole extent), and the rows are written second loop fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WriteOrder {
    rows: usize,
    inner: usize,
    outer: usize,
}

/// Where a tile's compound source rows (`group`, innermost first) lie far apart in the
/// destination along the first loop but one destination row apart along the second (NHWC ->
/// MACE's height-major image: the channels `W * 4` elements apart, the columns 4, each
/// destination row a pixel's 4 lanes of 2-4 bytes), writing the rows in source order scatters
/// each warp's stores over as many places as it writes rows; written second loop fastest they
/// form runs of `outer` rows. For that the tile (`ta` rows, at most) is cut to whole extents of
/// the first loop, where two or more fit, keeping its source rows (`rows * unit` elements) a
/// multiple of `keep` elements, the read vector (with 1023 rows of 3 channels the reads fell to
/// single elements: MACE height-major images of 3 channels ran 0.57-0.74 of the copy against
/// 0.93-1.0); None elsewhere (and with padding or a tail cell).
fn write_order(
    group: &[LoopDim],
    ta: usize,
    drow: usize,
    keep: usize,
    job: &TileJob,
) -> Option<WriteOrder> {
    let (first, second) = (group.first()?, group.get(1)?);
    let inner = first.extent;
    let scattered = second.dst_stride == drow as isize && first.dst_stride != drow as isize;
    if job.b_pad > 0 || job.a_tail > 0 || inner == 0 || !scattered {
        return None;
    }
    let outer = (2..=(ta / inner).min(second.extent))
        .rev()
        .find(|o| (o * inner * job.unit).is_multiple_of(keep.max(1)))?;
    Some(WriteOrder {
        rows: outer * inner,
        inner,
        outer,
    })
}

/// How thread `tid` walks a phase of rows of `per_row` vectors of `elems` elements: (its
/// vector's column in elements at step `i`, the row of step `i`). When the block covers whole
/// rows per step, each thread keeps one column and steps down the rows by a constant.
fn walk(per_row: usize, elems: usize) -> (String, String) {
    if THREADS.is_multiple_of(per_row) {
        (
            format!("(tid % {per_row}u) * {elems}u"),
            format!("tid / {per_row}u + i * {}u", THREADS / per_row),
        )
    } else {
        (
            format!("((tid + i * {THREADS}u) % {per_row}u) * {elems}u"),
            format!("(tid + i * {THREADS}u) / {per_row}u"),
        )
    }
}

/// The test that step `i` is one of the phase's `total` vectors (empty when every step is).
fn guard(total: usize) -> String {
    if total.is_multiple_of(THREADS) {
        String::new()
    } else {
        format!("tid + i * {THREADS}u < {total}u && ")
    }
}

/// The destination offset of compound source index `ia` (innermost group loop first).
fn row_offset(group: &[LoopDim], u: &str) -> String {
    let mut w = 1usize;
    let mut terms = Vec::new();
    for (gi, g) in group.iter().enumerate() {
        let mut t = if w == 1 {
            "ia".to_string()
        } else {
            format!("(ia / {w}{u})")
        };
        if gi + 1 < group.len() {
            t = format!("({t} % {}{u})", g.extent);
        }
        terms.push(format!("{t} * {}{u}", g.dst_stride));
        w *= g.extent;
    }
    terms.join(" + ")
}

/// Code filling `w.e[0..vw]` with the cast elements `j..j + vw` of destination row `la`:
/// element `jj` is lane `jj % unit` of cell `jj / unit`, at
/// `sm[jj / unit][la * unit + jj % unit]`, or the fill value from `data` on when `padded`.
/// Whole cells (or whole parts of one) are contiguous in shared memory and are read as vectors.
#[allow(clippy::too_many_arguments)]
fn read_cells(
    k: &mut String,
    s: &str,
    unit: usize,
    vw: usize,
    ssize: usize,
    shared: Shared,
    data: usize,
    padded: bool,
) {
    let n = vw.min(unit);
    let pieces = unit > 1 && n > 1 && (unit.is_multiple_of(vw) || vw.is_multiple_of(unit));
    let bytes = n * ssize;
    // Pieces are read as vectors from the padded rows only (the flat copy's shift leaves
    // them unaligned).
    let aligned = match shared {
        Shared::Rows { row } => (row * ssize).is_multiple_of(bytes),
        Shared::Flat { .. } => false,
    };
    if !padded && pieces && matches!(bytes, 2 | 4 | 8 | 16) && aligned {
        let vt = vector_type(bytes);
        let _ = writeln!(
            k,
            "      #pragma unroll\n      for (int p = 0; p < {}; ++p) {{",
            vw / n
        );
        let _ = writeln!(k, "        const unsigned int jj = j + p * {n}u;");
        let _ = writeln!(k, "        union {{ {s} e[{n}]; {vt} q; }} x;");
        let _ = writeln!(k, "        x.q = *(const {vt}*)&{};", shared.at(unit));
        let _ = writeln!(
            k,
            "        #pragma unroll\n        for (int m = 0; m < {n}; ++m) w.e[p * {n} + m] = cast(x.e[m]);\n      }}"
        );
    } else {
        let value = format!("cast({})", shared.at(unit));
        let value = if padded {
            format!("jj < {data}u ? {value} : fill")
        } else {
            value
        };
        let _ = writeln!(
            k,
            "      #pragma unroll\n      for (int e = 0; e < {vw}; ++e) {{\n        const unsigned int jj = j + e;\n        w.e[e] = {value};\n      }}"
        );
    }
}

#[cfg(test)]
#[path = "tile_tests.rs"]
mod tests;

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
//!
//! Where one step of the region makes a tile far smaller or narrower than that (a whole
//! transposition of a few hundred elements, or compound rows of many channels), the tile takes
//! several steps of one more loop (`tile_steps.rs`).

use std::fmt::Write;

use layoutkit_core::plan::LoopDim;
use layoutkit_core::tiling::TileAxes;
use layoutkit_core::CastSpec;

use super::{decode, elements, offset, prelude, storage, vector_type, Launch, Tuning};

#[path = "tile_flat.rs"]
mod flat;
use flat::{read_cells, row_padding, FlatRead, FlatSteps, FlatWrite, Shared};
#[path = "tile_order.rs"]
mod order;
use order::{write_order, WriteOrder};
#[path = "tile_steps.rs"]
mod steps;
use steps::Steps;
#[path = "tile_thin.rs"]
mod thin;
use thin::ThinTile;
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
    /// Fill elements after each destination row (needs `unit == 1` and the whole of `b` in one
    /// tile; any cast).
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
        let shape = |most: usize, multiple: usize| {
            let tb = b_cells.div_ceil(b_cells.div_ceil(most.max(1)));
            let tb = tb.next_multiple_of(multiple).min(b_cells);
            let fit = (tile_elements / (tb * unit)).max(1);
            let mut ta = 1;
            while ta * 2 <= fit && ta < a_cells {
                ta *= 2;
            }
            (ta.min(a_cells), tb, fit)
        };
        let (ta, tb, _) = shape(1024 / (unit * dsize), 1);
        // Compound rows of single elements: destination rows short enough that the source
        // rows reach 128 bytes where the cells allow (MACE's height-major image -> NHWC:
        // 250-2048 channels of 1 KiB rows left source rows of 16-32 bytes, f16 0.74-0.86 of
        // the device copy), a multiple of 4 elements (whole write vectors); all the cells in
        // one tile where they fit (a 7 x 7 image's 28).
        let least = (128 / ssize).min(a_cells);
        if unit == 1 && compound && ta < least {
            let (ta, tb, fit) = shape(tile_elements / least, 4);
            return (if a_cells <= fit { a_cells } else { ta }, tb);
        }
        return (ta, tb);
    }
    let area = (tile_target(unit, false, sizes, 0) / unit).max(1);
    let edge = tile_edge(ssize.max(dsize));
    let mut tb = b_cells.next_power_of_two().clamp(1, edge);
    let ta = (area / tb).min(a_cells.next_power_of_two()).max(1);
    tb = (area / ta).min(b_cells.next_power_of_two()).max(1);
    (ta.min(a_cells), tb.min(b_cells))
}

/// The elements of a full tile: `tile_elements` for tiles of units or compound source rows
/// (when not 0), else about edge^2 elements, at least a 16-byte vector of the narrower type
/// for every thread.
fn tile_target(
    unit: usize,
    compound: bool,
    (ssize, dsize): (usize, usize),
    tile_elements: usize,
) -> usize {
    if tile_elements > 0 && (unit > 1 || compound) {
        return tile_elements;
    }
    let edge = tile_edge(ssize.max(dsize));
    (edge * edge).max(THREADS * 16 / ssize.min(dsize))
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
    if let Some(t) = ThinTile::of(job, a, b) {
        return t.kernel(job);
    }
    if let Some(w) = WordTile::of(job, a, b) {
        return w.kernel(job, &a[0], b);
    }
    let padded = job.b_pad > 0 || job.a_tail > 0;
    assert!(
        job.a_tail == 0 || c.src == c.dst,
        "a tail cell in tiles needs an identity cast"
    );
    // The source-contiguous loops innermost first; `full` whole cells along them, `a_cells`
    // with the partial tail cell.
    let mut group: Vec<LoopDim> = a.iter().rev().copied().collect();
    let b_cells = b.extent;
    let index_bytes = if job.small { 4 } else { 8 };
    let mut full: usize = group.iter().map(|g| g.extent).product();
    let a_cells = full + usize::from(job.a_tail > 0);
    let (ta, tb) = tile_shape(
        a_cells,
        b_cells,
        unit,
        group.len() > 1,
        (ssize, dsize),
        job.tuning.tile_elements,
    );
    let (mut ta, mut tb) = if job.b_pad > 0 {
        (ta, b_cells)
    } else {
        flat::whole_rows_shape(job, (&group, b), (ta, tb), ssize).unwrap_or((ta, tb))
    };
    // Static shared memory is limited to 48 KiB: halve the rows until the tile and its row
    // table fit (only wide elements with a whole padded destination row in the tile come near).
    let shared = |ta: usize| tb * (ta + row_padding(ta)) * unit * ssize + ta * index_bytes;
    while ta > 1 && shared(ta) > SHARED_BYTES {
        ta /= 2;
    }
    // A destination row: `tb` cells of data, then the padding.
    let drow = tb * unit + job.b_pad;
    // The tile's source rows keep the read vector a power-of-two tile allows.
    let keep = widest(ssize, job.tuning.read_bytes, &[(ta * unit) as isize]);
    let mut order = write_order(&group, ta, drow, keep, job);
    if let Some(WriteOrder { rows, .. }) = order {
        ta = rows;
    }
    // Compound rows of many channels whose columns are one destination row apart: the
    // columns become steps and the tile a block of channels by columns (`tile_steps.rs`),
    // where the write order finds no two columns of whole channel extents (or padding
    // follows the lanes) or its rows, channel extents of a multiple of 128 bytes apart, would
    // meet in the same shared-memory banks.
    let conflicts = |o: WriteOrder| (o.inner * unit * ssize).is_multiple_of(128);
    let columns = Steps::columns(job, &group, b_cells, |ta, n| {
        n * b_cells * (ta + row_padding(ta)) * ssize + ta * index_bytes <= SHARED_BYTES
    })
    .filter(|_| order.is_none_or(conflicts));
    if let Some((_, t)) = columns {
        group.truncate(1);
        full = group[0].extent;
        (ta, tb, order) = (t, b_cells, None);
    }
    let a_cells = full + usize::from(job.a_tail > 0);
    let drow = tb * unit + job.b_pad;
    let (na, nb) = (a_cells.div_ceil(ta), b_cells.div_ceil(tb));

    // Vectors: every row start and every row length (whole tensor and tile) a multiple.
    let mut src_vals = vec![job.src_offset as isize, b.src_stride];
    src_vals.extend(outer.iter().map(|l| l.src_stride));
    src_vals.extend([(ta * unit) as isize, (full * unit) as isize]);
    let mut dst_vals = vec![job.dst_offset as isize];
    dst_vals.extend(outer.iter().map(|l| l.dst_stride));
    if let Some((st, _)) = columns {
        src_vals.push(st.lp.src_stride);
        dst_vals.push(st.lp.dst_stride);
    }
    let vr = widest(ssize, job.tuning.read_bytes, &src_vals);
    // Flat reads where the tile's source rows lie back to back (see `FlatRead`).
    let flat = FlatRead::of(job, (ta, tb), full, b.src_stride, (vr, ssize));
    dst_vals.extend(group.iter().map(|g| g.dst_stride));
    dst_vals.extend([drow as isize, (b_cells * unit + job.b_pad) as isize]);
    let vw = widest(dsize, job.tuning.write_bytes, &dst_vals);

    // Flat writes where the tile's destination rows lie back to back (see `FlatWrite`).
    let whole_rows = unit == 1 && job.b_pad == 0 && job.a_tail == 0 && tb == b_cells;
    let flat_write = if whole_rows && order.is_none() && columns.is_none() {
        FlatWrite::of(&group, drow, vw, dsize, job.tuning.flat_write_bytes)
    } else {
        None
    };
    let row = (ta + row_padding(ta)) * unit;

    // Several steps of the innermost outer loop where one tile holds a whole small
    // transposition (`tile_steps.rs`); a flat read only where the steps' rows are back to back.
    let target = tile_target(
        unit,
        group.len() > 1,
        (ssize, dsize),
        job.tuning.tile_elements,
    );
    let mut outer = outer.clone();
    // With a flat write, only steps whose destination rows follow the last step's (one run).
    let steps = match columns {
        Some((st, _)) => Some(st),
        None => {
            let fits = |n: usize| match flat {
                Some(f) => f.shared_elements(n * tb) * ssize + ta * index_bytes <= SHARED_BYTES,
                None => n * tb * row * ssize + ta * index_bytes <= SHARED_BYTES,
            };
            Steps::outer(job, &outer, (na, nb), (ta * tb * unit, target), drow, fits)
                .filter(|st| flat.is_none() || st.lp.src_stride == (tb * full * unit) as isize)
                .filter(|st| {
                    flat_write.is_none()
                        || (job.tuning.flat_steps && st.lp.dst_stride == (a_cells * drow) as isize)
                })
        }
    };
    if columns.is_none() && steps.is_some() {
        outer.pop();
    }
    let outer = &outer;
    let ns = steps.map_or(1, |st| st.tiles());
    let blocks = na * nb * ns * elements(outer);

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
    let srows = steps.map_or(1, |st| st.n) * tb;
    match flat {
        Some(f) => {
            let _ = writeln!(
                k,
                "  __shared__ __align__(16) {s} smf[{}];",
                f.shared_elements(srows)
            );
        }
        None => {
            let _ = writeln!(k, "  __shared__ __align__(16) {s} sm[{srows}][{row}];");
        }
    }
    if flat_write.is_none() {
        let _ = writeln!(k, "  __shared__ {it} rowoff[{ta}];");
    }
    let _ = writeln!(k, "  const {it} blk = blockIdx.x;");
    match steps {
        None => {
            let _ = writeln!(
                k,
                "  const {it} tb = blk % {nb}{u}, ta = (blk / {nb}{u}) % {na}{u}, o = blk / {}{u};",
                na * nb
            );
        }
        Some(_) => {
            let _ = writeln!(
                k,
                "  const {it} tb = blk % {nb}{u}, ta = (blk / {nb}{u}) % {na}{u}, ts = (blk / {}{u}) % {ns}{u}, o = blk / {}{u};",
                na * nb,
                na * nb * ns
            );
        }
    }
    decode(&mut k, outer, "o", "  ", it, u);
    let step_base = |src: bool| match steps {
        Some(st) => {
            let stride = if src {
                st.lp.src_stride
            } else {
                st.lp.dst_stride
            };
            format!(" + ts * {}{u}", st.n as isize * stride)
        }
        None => String::new(),
    };
    let _ = writeln!(
        k,
        "  const {it} sbase = {}{}, dbase = {}{};",
        offset(outer, job.src_offset, true, u),
        step_base(true),
        offset(outer, job.dst_offset, false, u),
        step_base(false)
    );
    let _ = writeln!(k, "  const {it} a0 = ta * {ta}{u}, b0 = tb * {tb}{u};");
    let _ = writeln!(k, "  const unsigned int tid = threadIdx.x;");
    // The test that step `s` is inside the step loop (when the steps do not divide it), and
    // the offset of step `s` on each side.
    let (step_ok, step_src, step_dst) = match steps {
        Some(st) => (
            if st.ragged() {
                format!("ts * {}{u} + s < {}{u} && ", st.n, st.lp.extent)
            } else {
                String::new()
            },
            format!(" + s * {}{u}", st.lp.src_stride),
            format!(" + s * {}{u}", st.lp.dst_stride),
        ),
        None => Default::default(),
    };
    // The destination offset of each tile row (cell `ia` of the compound source index).
    if flat_write.is_none() {
        let _ = writeln!(
            k,
            "  for (unsigned int r = tid; r < {ta}u; r += {THREADS}u) {{\n    const {it} ia = a0 + r;"
        );
        let _ = writeln!(k, "    rowoff[r] = {};\n  }}", row_offset(&group, u));
    }

    // A shared row `lb` of step `s` is row `lr`; without steps, `lb` itself.
    let srow = if steps.is_some() { "lr" } else { "lb" };
    let split = |step: &str| match steps {
        Some(_) => format!("lr = {step}, s = lr / {tb}u, lb = lr % {tb}u"),
        None => format!("lb = {step}"),
    };
    match (flat, steps) {
        (Some(f), None) => f.read(&mut k, (tb, b_cells), it, u),
        (Some(f), Some(st)) => {
            // The steps' source rows are one run (checked above).
            let run = tb * f.row;
            let count = if st.ragged() {
                format!(
                    "({e}{u} - ts * {n}{u} < {n}{u} ? {e}{u} - ts * {n}{u} : {n}{u}) * {run}{u}",
                    e = st.lp.extent,
                    n = st.n
                )
            } else {
                format!("{}{u}", st.n * run)
            };
            f.read_run(&mut k, "sbase".into(), count, it, u);
        }
        (None, _) => {
            // Read: source rows (one per b cell and step) of `ta * unit` elements, `vr` at a
            // time.
            let rv = (ta * unit).div_ceil(vr);
            let svt = vector_type(vr * ssize);
            let (col, step) = walk(rv, vr);
            let _ = writeln!(
                k,
                "  #pragma unroll\n  for (unsigned int i = 0; i < {}u; ++i) {{",
                (rv * srows).div_ceil(THREADS)
            );
            // One flat test per vector (nested branches measured slower: the loads of the
            // unrolled steps are then not issued together).
            let _ = writeln!(k, "    const unsigned int {}, j = {col};", split(&step));
            let _ = writeln!(k, "    const {it} ea = a0 * {unit}{u} + j;");
            let row_ok = format!("{}{step_ok}b0 + lb < {b_cells}{u}", guard(rv * srows));
            let _ = writeln!(
                k,
                "    if ({row_ok} && ea + {vr}u <= {}{u}) {{\n      union {{ {s} e[{vr}]; {svt} q; }} r;\n      r.q = *(const {svt}*)(src + sbase{step_src} + ea + (b0 + lb) * {}{u});",
                full * unit,
                b.src_stride
            );
            if row.is_multiple_of(vr) && vr > 1 {
                let _ = writeln!(k, "      *({svt}*)&sm[{srow}][j] = r.q;");
            } else {
                let _ = writeln!(
                    k,
                    "      #pragma unroll\n      for (int e = 0; e < {vr}; ++e) sm[{srow}][j + e] = r.e[e];"
                );
            }
            k.push_str("    }\n  }\n");
        }
    }
    if job.a_tail > 0 {
        let head = match steps {
            Some(_) => format!(
                "for (unsigned int lr = tid; lr < {srows}u; lr += {THREADS}u) {{\n      const unsigned int s = lr / {tb}u, lb = lr % {tb}u;"
            ),
            None => format!("for (unsigned int lb = tid; lb < {tb}u; lb += {THREADS}u) {{"),
        };
        let _ = writeln!(
            k,
            "  if (a0 + {ta}{u} > {full}{u}) {{\n    const unsigned int col = ({full}{u} - a0) * {unit}u;\n    {head}\n      if ({step_ok}b0 + lb < {b_cells}{u}) {{\n        const {s}* p = src + sbase{step_src} + {}{u} + (b0 + lb) * {}{u};\n        #pragma unroll\n        for (int e = 0; e < {unit}; ++e) sm[{srow}][col + e] = e < {} ? p[e] : fill;\n      }}\n    }}\n  }}",
            full * unit,
            b.src_stride,
            job.a_tail
        );
    }
    k.push_str("  __syncthreads();\n");

    let on_steps = steps.is_some();
    let cell = match flat {
        Some(f) => Shared::Flat {
            row: f.row,
            steps: on_steps,
        },
        None => Shared::Rows {
            row,
            steps: on_steps,
        },
    };
    if let Some(f) = flat_write {
        let fs = steps.map(|st| FlatSteps {
            n: st.n,
            extent: st.lp.extent,
            tb,
        });
        f.write(&mut k, d, (ta, a_cells), fs, cell.at(unit), it, u);
    } else {
        // Write: destination rows (one per a cell and step) of `drow` elements, `vw` at a
        // time; with steps, steps fastest where a cell's rows of consecutive steps follow
        // each other in the destination.
        let wv = drow / vw;
        let wrows = steps.map_or(1, |st| st.n) * ta;
        let dvt = vector_type(vw * dsize);
        let (col, step) = walk(wv, vw);
        let _ = writeln!(
            k,
            "  #pragma unroll\n  for (unsigned int i = 0; i < {}u; ++i) {{",
            (wv * wrows).div_ceil(THREADS)
        );
        let (lw, tail) = match steps {
            Some(st) if st.dst_fast => (
                format!("lq = {step}, s = lq % {n}u, lw = lq / {n}u", n = st.n),
                format!(", sr = s * {tb}u"),
            ),
            Some(_) => (
                format!("lq = {step}, s = lq / {ta}u, lw = lq % {ta}u"),
                format!(", sr = s * {tb}u"),
            ),
            None => (format!("lw = {step}"), String::new()),
        };
        match (order, steps) {
            (
                Some(WriteOrder {
                    inner, outer: m, ..
                }),
                _,
            ) => {
                let _ = writeln!(
                    k,
                    "    const unsigned int {lw}, la = (lw % {m}u) * {inner}u + lw / {m}u{tail}, j = {col};"
                );
            }
            (None, Some(_)) => {
                let _ = writeln!(k, "    const unsigned int {lw}, la = lw{tail}, j = {col};");
            }
            (None, None) => {
                let _ = writeln!(k, "    const unsigned int la = {step}, j = {col};");
            }
        }
        let _ = writeln!(
            k,
            "    if ({}{step_ok}a0 + la < {a_cells}{u} && b0 * {unit}{u} + j + {vw}u <= {}{u}) {{",
            guard(wv * wrows),
            b_cells * unit + job.b_pad
        );
        let _ = writeln!(k, "      union {{ {d} e[{vw}]; {dvt} q; }} w;");
        read_cells(&mut k, s, unit, vw, ssize, cell, tb * unit, job.b_pad > 0);
        let _ = writeln!(
            k,
            "      *({dvt}*)(dst + dbase{step_dst} + rowoff[la] + b0 * {unit}{u} + j) = w.q;\n    }}\n  }}"
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

#[cfg(test)]
#[path = "tile_tests.rs"]
mod tests;

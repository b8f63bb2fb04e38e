//! Tiles whose rows lie back to back in memory, read or written as one flat run (see
//! [`FlatRead`], [`FlatWrite`]), and where the write phase finds a tile element in shared
//! memory ([`Shared`]).

use std::fmt::Write;

use layoutkit_core::plan::LoopDim;

use super::super::vector_type;
use super::{widest, TileJob, SHARED_BYTES, THREADS};

/// Where the tile's shared copy of its source rows lies: padded rows of `row` elements
/// (`sm[cell][...]`), or the flat copy of [`FlatRead`], source rows of `row` elements back to
/// back from element `shift` of `smf`; with `steps`, the rows of each step after the last
/// step's (`sr`, the step's first row).
#[derive(Clone, Copy, Debug)]
pub(super) enum Shared {
    Rows { row: usize, steps: bool },
    Flat { row: usize, steps: bool },
}

impl Shared {
    /// The shared element holding lane `jj % unit` of cell `jj / unit` of destination row `la`
    /// (CUDA variables `jj`, `la`, `sr` with steps, and `shift` for the flat copy).
    pub(super) fn at(self, unit: usize) -> String {
        match self {
            Shared::Rows { steps: false, .. } => {
                format!("sm[jj / {unit}u][la * {unit}u + jj % {unit}u]")
            }
            Shared::Rows { steps: true, .. } => {
                format!("sm[sr + jj / {unit}u][la * {unit}u + jj % {unit}u]")
            }
            Shared::Flat { row, steps: false } => {
                format!("smf[shift + jj / {unit}u * {row}u + la * {unit}u + jj % {unit}u]")
            }
            Shared::Flat { row, steps: true } => {
                format!("smf[shift + (sr + jj / {unit}u) * {row}u + la * {unit}u + jj % {unit}u]")
            }
        }
    }
}

/// Padding cells after each shared row of `ta` cells: an odd number of cells per row, so the
/// cells that the lanes of a warp read (one per row, rows one write vector apart) fall in
/// different banks. Plain transpositions with rows of 7 halves padded to 8 (16 bytes) met 8 to
/// a bank (`mace:in_out_width -> NHWC` f16 with 7 x 7 planes, 3.75 M conflicts, H200).
pub(super) fn row_padding(ta: usize) -> usize {
    if ta.is_multiple_of(2) {
        1
    } else {
        2
    }
}

/// Reading a tile's source as one contiguous range: where the tile spans the whole of `a`
/// (no partial cell) and its source rows lie back to back (`b`'s source stride is a row), the
/// tile's rows are one run of `rows x row` elements, read in vectors of `vr` elements from the
/// first aligned element whatever the rows' own alignment (the rows' start and length, such as
/// a 7 x 7 plane's 49 bytes or an NHWC pixel's 3 channels, left byte tiles one element per
/// load: `i8 NCHW <-> NHWC` with 7 x 7 planes at 0.46 of the device copy), into a flat shared
/// copy at the same alignment (`shift`: the run's first element modulo `vr`); the elements
/// before the first aligned vector and after the last whole one are read one at a time.
#[derive(Clone, Copy, Debug)]
pub(super) struct FlatRead {
    /// Elements per source row of the tile (`full * unit`).
    pub(super) row: usize,
    /// Elements per flat vector.
    vr: usize,
    /// Bytes per source element.
    ssize: usize,
}

impl FlatRead {
    pub(super) fn of(
        job: &TileJob,
        (ta, tb): (usize, usize),
        full: usize,
        b_src_stride: isize,
        (vr, ssize): (usize, usize),
    ) -> Option<FlatRead> {
        let row = full * job.unit;
        let widest = widest(ssize, job.tuning.read_bytes, &[]);
        let f = FlatRead {
            row,
            vr: widest,
            ssize,
        };
        let fits = f.shared_elements(tb) * ssize + ta * 8 <= SHARED_BYTES;
        // Which rows (measured on an H100 and an H200, `bench/results/sweep.md`): rows of
        // more than one read, either short (16 bytes or less: an NHWC pixel of 3 floats or
        // bytes, 1.1-2.0x) or of 32 bytes or more read 1 or 2 bytes at a time (7 x 7 planes
        // of bytes or halves, 1.1-2.2x). Not: a row of one read (4 bytes of 4 channels,
        // 0.79-0.85x), rows of 4-byte reads (7 x 7 planes of floats, 0.82-0.89x), 18-byte
        // rows of halves (0.83-0.88x: the flat copy's odd rows of 2-byte elements meet in
        // shared-memory banks, where the padded rows do not). Units keep the padded rows,
        // whose cells the write phase reads as vectors.
        let bytes = row * ssize;
        let narrow = row > vr && (bytes <= 16 || (vr * ssize <= 2 && bytes >= 32));
        let back_to_back = ta == full && b_src_stride == row as isize;
        (job.unit == 1 && job.a_tail == 0 && back_to_back && vr < widest && narrow && fits)
            .then_some(f)
    }

    /// Elements of the flat shared copy: the tile's rows and the alignment shift.
    pub(super) fn shared_elements(self, tb: usize) -> usize {
        tb * self.row + self.vr
    }

    /// The read phase: whole vectors, then the elements before and after them.
    pub(super) fn read(self, k: &mut String, (tb, b_cells): (usize, usize), it: &str, u: &str) {
        let (start, count) = run_of(u, ("sbase", "b0"), (b_cells, tb, self.row));
        self.read_run(k, start, count, it, u);
    }

    /// The read phase of the run of `count` elements (a CUDA expression) from `start`.
    pub(super) fn read_run(self, k: &mut String, start: String, count: String, it: &str, u: &str) {
        let vr = self.vr;
        let vt = vector_type(vr * self.ssize);
        READ_RUN.bounds(k, (it, u), (start, count), vr);
        let _ = writeln!(
            k,
            "  for (unsigned int v = tid; v < nv; v += {THREADS}u)\n    *({vt}*)&smf[shift + head + v * {vr}u] = *(const {vt}*)(src + gs + head + v * {vr}u);"
        );
        let _ = writeln!(
            k,
            "{};\n    smf[shift + f] = src[gs + f];\n  }}",
            READ_RUN.edges()
        );
    }
}

/// The tile shape `(full, tb)` that makes a plain transposition's tile span whole source rows,
/// so that [`FlatRead`] reads them as one run: where the rows lie back to back (`b`'s source
/// stride is a row of `full` elements), are longer than the tile's `ta` cells but no more than
/// twice them, and have a length that leaves them loads of 1 or 2 bytes (NHWC pixels of 250
/// bytes, 2-byte aligned: i8 `NHWC -> NCHW` C=250 read in 2-byte loads, 32 per thread, at
/// 0.47-0.50 of the H200's device copy, its warps waiting on loads). `tb` becomes the largest
/// power of two of rows within the tile's `ta x tb` elements (8 at least, at most `b`).
pub(super) fn whole_rows_shape(
    job: &TileJob,
    (group, b): (&[LoopDim], &LoopDim),
    (ta, tb): (usize, usize),
    ssize: usize,
) -> Option<(usize, usize)> {
    let [g] = group else { return None };
    let full = g.extent;
    let plain = job.unit == 1 && job.a_tail == 0 && job.b_pad == 0;
    let narrow_loads = !(full * ssize).is_multiple_of(4);
    if !(job.tuning.whole_rows && plain && narrow_loads && ta < full && full <= 2 * ta)
        || b.src_stride != full as isize
    {
        return None;
    }
    let mut rows = 8;
    while rows * 2 * full <= ta * tb {
        rows *= 2;
    }
    let rows = rows.min(b.extent);
    (rows * full * ssize + 16 <= SHARED_BYTES).then_some((full, rows))
}

/// Writing a tile's destination as one contiguous range: where the tile spans the whole of
/// `b` and its destination rows lie back to back (one `a` loop whose destination stride is a
/// row, no padding), the tile's rows are one run of `rows x drow` elements, written in
/// vectors of `vw` elements (`Tuning::flat_write_bytes`) from the first aligned element
/// whatever the rows' alignment (an NHWC pixel's 3 channels, a 7 x 7 plane's 49 bytes left
/// byte tiles one element per store); the elements before the first aligned vector and after
/// the last whole one are written one at a time.
///
/// Each vector finds its first element in the shared copy by one division (row `f / drow`,
/// column `f % drow`) and the others from it: the next column, or the next row's first where
/// the vector crosses a row's end (at most once where `vw <= drow`). A division per element
/// made these kernels instruction-bound (`ncu`, H200, i8 `NCHW32c -> NCHW` with 7 x 7 planes:
/// 39 instructions per byte, 0.44 of the device copy). Measured on an H200 against the
/// division per element (32 MiB rows whose kernels change, `bench/results/sweep.md`,
/// 2026-12-03): 1.155x by geometric mean with 4-byte stores (i8 `NHWC -> NCHW` C=2048 7 x 7
/// 1.46x, f16 `NHWC -> NCHW` and `kHWC8 -> NCHW` with 7 x 7 planes 1.10-1.21x), 0.92x with
/// 16-byte stores (bank conflicts, see `Tuning::flat_write_bytes`).
#[derive(Clone, Copy, Debug)]
pub(super) struct FlatWrite {
    drow: usize,
    vw: usize,
    dsize: usize,
}

impl FlatWrite {
    pub(super) fn of(
        group: &[LoopDim],
        drow: usize,
        vw: usize,
        dsize: usize,
        flat_bytes: usize,
    ) -> Option<FlatWrite> {
        let widest = widest(dsize, flat_bytes, &[]);
        let [g] = group else { return None };
        // Where the rows' own stores are 1 or 2 bytes (rows of an odd length of bytes or
        // halves). 2-byte elements with a division per element in 4-byte flat stores ran
        // 0.83-0.90x (f16 `NCHW32c -> NCHW` with 7 x 7 planes, H100).
        (g.dst_stride == drow as isize && vw * dsize <= 2 && vw < widest).then_some(FlatWrite {
            drow,
            vw: widest,
            dsize,
        })
    }

    /// The write phase; `at` is the shared element of row `la`, column `jj` (and, with
    /// `steps`, of the step whose first shared row is `sr`).
    ///
    /// With steps (`FlatSteps`), the run covers the tile's steps, whose destination rows
    /// follow each other: run row `L` is row `L % a_cells` of step `L / a_cells` (one tile
    /// spans the rows).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write(
        self,
        k: &mut String,
        d: &str,
        (ta, a_cells): (usize, usize),
        steps: Option<FlatSteps>,
        at: String,
        it: &str,
        u: &str,
    ) {
        let (drow, vw) = (self.drow, self.vw);
        let vt = vector_type(vw * self.dsize);
        let run = match steps {
            None => run_of(u, ("dbase", "a0"), (a_cells, ta, drow)),
            Some(st) => ("dbase".to_string(), st.count(a_cells * drow, u)),
        };
        WRITE_RUN.bounds(k, (it, u), run, vw);
        // Run row `L` as the tile's row `la` (and step row `sr`).
        let rows = |l: &str, la: &str, sr: &str| match steps {
            None => format!("{la} = {l}"),
            Some(st) => format!(
                "{la} = {l} % {a_cells}u, {sr} = {l} / {a_cells}u * {}u",
                st.tb
            ),
        };
        let _ = writeln!(
            k,
            "  for (unsigned int v = tid; v < nw; v += {THREADS}u) {{\n    union {{ {d} e[{vw}]; {vt} q; }} w;"
        );
        if vw <= drow {
            // One division per vector; the row's end crossed at most once.
            let _ = writeln!(
                k,
                "    const unsigned int f0 = whead + v * {vw}u, l0 = f0 / {drow}u, jj0 = f0 - l0 * {drow}u;\n    const unsigned int {}, {};",
                rows("l0", "la0", "sr0"),
                rows("(l0 + 1u)", "la1", "sr1")
            );
            let pick = match steps {
                None => "la = next ? la1 : la0".to_string(),
                Some(_) => "la = next ? la1 : la0, sr = next ? sr1 : sr0".to_string(),
            };
            let _ = writeln!(
                k,
                "    #pragma unroll\n    for (int e = 0; e < {vw}; ++e) {{\n      const bool next = jj0 + e >= {drow}u;\n      const unsigned int {pick}, jj = next ? jj0 + e - {drow}u : jj0 + e;\n      w.e[e] = cast({at});\n    }}"
            );
        } else {
            let _ = writeln!(
                k,
                "    #pragma unroll\n    for (int e = 0; e < {vw}; ++e) {{\n      const unsigned int f = whead + v * {vw}u + e, l = f / {drow}u, jj = f % {drow}u, {};\n      w.e[e] = cast({at});\n    }}",
                rows("l", "la", "sr")
            );
        }
        let _ = writeln!(k, "    *({vt}*)(dst + ds + whead + v * {vw}u) = w.q;\n  }}");
        let _ = writeln!(
            k,
            "{}, l = f / {drow}u, jj = f % {drow}u, {};\n    dst[ds + f] = cast({at});\n  }}",
            WRITE_RUN.edges(),
            rows("l", "la", "sr")
        );
    }
}

/// The steps of a tile whose flat write covers them all: `n` per tile of a loop of `extent`
/// (the last tile holds fewer where `n` does not divide it), `tb` shared rows per step.
#[derive(Clone, Copy, Debug)]
pub(super) struct FlatSteps {
    pub(super) n: usize,
    pub(super) extent: usize,
    pub(super) tb: usize,
}

impl FlatSteps {
    /// The elements of the tile's run: `per_step` for each of its steps.
    fn count(self, per_step: usize, u: &str) -> String {
        let FlatSteps { n, extent, .. } = self;
        if extent.is_multiple_of(n) {
            format!("{}{u}", n * per_step)
        } else {
            format!(
                "({extent}{u} - ts * {n}{u} < {n}{u} ? {extent}{u} - ts * {n}{u} : {n}{u}) * {per_step}{u}"
            )
        }
    }
}

/// The generated code's names for a flat run: its first element, its element count, its
/// first element's distance from a vector boundary, the elements before the first whole
/// vector, the whole vectors, and the element after the last of them.
struct RunVars {
    start: &'static str,
    count: &'static str,
    shift: &'static str,
    head: &'static str,
    vectors: &'static str,
    tail: &'static str,
}

const READ_RUN: RunVars = RunVars {
    start: "gs",
    count: "gn",
    shift: "shift",
    head: "head",
    vectors: "nv",
    tail: "tail0",
};

const WRITE_RUN: RunVars = RunVars {
    start: "ds",
    count: "dn",
    shift: "wshift",
    head: "whead",
    vectors: "nw",
    tail: "wtail0",
};

/// The first element and the element count of the run of a tile's rows from `first` (rows
/// of `row` elements from `base`; at most `tile` rows, fewer where `extent - first` are left).
fn run_of(
    u: &str,
    (base, first): (&str, &str),
    (extent, tile, row): (usize, usize, usize),
) -> (String, String) {
    (
        format!("{base} + {first} * {row}{u}"),
        format!(
            "({extent}{u} - {first} < {tile}{u} ? {extent}{u} - {first} : {tile}{u}) * {row}{u}"
        ),
    )
}

impl RunVars {
    /// The run of `count` elements from `begin` (CUDA expressions), and its vectors of `v`
    /// elements.
    fn bounds(
        &self,
        k: &mut String,
        (it, u): (&str, &str),
        (begin, n): (String, String),
        v: usize,
    ) {
        let RunVars {
            start,
            count,
            shift,
            head,
            vectors,
            tail,
        } = self;
        let _ = writeln!(
            k,
            "  const {it} {start} = {begin};\n  const unsigned int {count} = (unsigned int)({n});"
        );
        let _ = writeln!(
            k,
            "  const unsigned int {shift} = (unsigned int)({start} % {v}{u}), {head} = ({v}u - {shift}) % {v}u;"
        );
        let _ = writeln!(
            k,
            "  const unsigned int {vectors} = {count} > {head} ? ({count} - {head}) / {v}u : 0u, {tail} = {head} + {vectors} * {v}u;"
        );
    }

    /// The loop over the run's elements outside its whole vectors, up to the declaration of
    /// `f` (the element's place in the run), which the caller ends and follows with the body.
    fn edges(&self) -> String {
        let RunVars {
            count, head, tail, ..
        } = self;
        format!(
            "  for (unsigned int e = tid; e < {head} + ({count} - {tail}); e += {THREADS}u) {{\n    const unsigned int f = e < {head} ? e : {tail} + (e - {head})"
        )
    }
}

/// Code filling `w.e[0..vw]` with the cast elements `j..j + vw` of destination row `la`:
/// element `jj` is lane `jj % unit` of cell `jj / unit`, at
/// `sm[jj / unit][la * unit + jj % unit]`, or the fill value from `data` on when `padded`.
/// Whole cells (or whole parts of one) are contiguous in shared memory and are read as vectors.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_cells(
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
        Shared::Rows { row, .. } => (row * ssize).is_multiple_of(bytes),
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

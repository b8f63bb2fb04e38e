//! Tiles of 1-byte destination elements transposed in registers, a 4-byte word at a time
//! ([`WordTile`]).
//!
//! The element tile stages the source rows in shared memory as they are and gathers each
//! destination vector from it element by element: a byte transposition costs one 1-byte
//! shared store and one 1-byte shared load per element, and the 1-byte stores of a warp meet
//! in pairs in the banks. On an H200 that made shared memory, not DRAM, the limit (`ncu` on
//! i8 `NCHW -> NCHW32c` C=256 64 x 64: shared-memory pipe 82% busy, DRAM 38%, warps stalled
//! on the shared-memory queue; 0.62-0.76 of the device copy for most of the family).
//!
//! Here each thread reads `k = 4` source rows of `m * k` elements each (one vector of up to
//! 16 bytes per row: bytes, or floats cast to bytes), casts them, and transposes the
//! `k x (m * k)` block in registers into `m * k` words, each `k` consecutive elements of one
//! destination row. The shared tile holds destination rows of words, so both phases move
//! whole words: one shared access per 4 bytes. Padding after the destination rows (the
//! channels that complete an `NCHW32c` block) is written as whole words of fill in the same
//! pass, whatever the cast.

use std::fmt::Write;

use layoutkit_core::plan::LoopDim;

use super::super::{decode, offset, prelude, storage, vector_type, Launch};
use super::{walk, TileJob, SHARED_BYTES, THREADS};

/// A word tile's geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WordTile {
    /// Destination elements per 4-byte word (rows read per thread).
    pub(super) k: usize,
    /// Source elements read per row and thread (`m * k`).
    pub(super) cols: usize,
    /// Tile cells along `a` (destination rows) and `b` (destination columns).
    pub(super) ta: usize,
    pub(super) tb: usize,
    /// Words per shared row: `tb / k`, made odd.
    pub(super) pitch: usize,
}

/// Destination bytes per word tile (as the byte tiles of the element kernel: 128 x 128).
const TILE_BYTES: usize = 16 * 1024;

impl WordTile {
    /// The word tile of `job` when it has one: a plain transposition (one source-contiguous
    /// loop `a`, no units; padding in whole words after rows that one tile spans) into 1-byte
    /// elements, with every source row start
    /// a multiple of `m * k` elements (read as one vector of at most 16 bytes), every
    /// destination row start and extent along `b` a multiple of `k` (whole words), and
    /// extents that cut into whole blocks (`a` a multiple of `m * k`, `b` of `k`).
    ///
    /// The lanes of a warp take `32 / (m * k)` blocks along `a` by `m * k` along `b`, so a
    /// warp's loads cover 32 elements of each of its rows and its shared stores (words
    /// `m * k` rows apart, rows an odd number of words long) fall in 32 different banks.
    pub(super) fn of(job: &TileJob, group: &[LoopDim], b: &LoopDim) -> Option<WordTile> {
        let c = job.cast;
        let (ssize, dsize) = (c.src.size_bytes(), c.dst.size_bytes());
        let [g] = group else { return None };
        // Only 1-byte destinations: word tiles of 2-byte ones (pairs, k = 2) ran 0.77-1.0x
        // the element tile on an H200 (f16 and f32 -> f16 `NCHW <-> NHWC`, `kHWC8 -> NCHW`,
        // 32 MiB; not traced further), which already moves two bytes per shared access there.
        if job.unit != 1 || job.a_tail > 0 || dsize != 1 {
            return None;
        }
        let k = 4 / dsize;
        let (full, b_cells) = (g.extent, b.extent);
        // Padding: whole words of fill after the rows, which the tile spans whole.
        if job.b_pad > 0 && (!job.b_pad.is_multiple_of(k) || b_cells > 128 / dsize) {
            return None;
        }
        let mut src_vals = vec![job.src_offset as isize, b.src_stride];
        src_vals.extend(job.axes.outer.iter().map(|l| l.src_stride));
        let mut dst_vals = vec![job.dst_offset as isize, g.dst_stride];
        dst_vals.extend(job.axes.outer.iter().map(|l| l.dst_stride));
        let divides = |v: usize, vals: &[isize]| vals.iter().all(|x| x % v as isize == 0);
        if !divides(k, &dst_vals) || !b_cells.is_multiple_of(k) {
            return None;
        }
        // The tile: destination rows of up to 128 bytes, as many as make TILE_BYTES.
        let elements = TILE_BYTES / dsize;
        let tb = b_cells.next_power_of_two().clamp(k, 128 / dsize);
        let ta = (elements / tb).min(full.next_power_of_two());
        [2, 1].into_iter().find_map(|m| {
            let cols = m * k;
            let fits = cols * ssize <= 16
                && divides(cols, &src_vals)
                && full.is_multiple_of(cols)
                && tb.is_multiple_of(cols * k);
            let pitch = (tb / k) | 1;
            let mut ta = ta;
            while ta > 32 && ta * pitch * 4 > SHARED_BYTES {
                ta /= 2;
            }
            (fits && ta.is_multiple_of(32) && ta * pitch * 4 <= SHARED_BYTES).then_some(WordTile {
                k,
                cols,
                ta,
                tb,
                pitch,
            })
        })
    }

    /// The kernel (`convert`, source and destination).
    pub(super) fn kernel(self, job: &TileJob, g: &LoopDim, b: &LoopDim) -> Launch {
        let c = job.cast;
        let (it, u) = super::super::index_type(job.small);
        let (s, d) = (storage(c.src), storage(c.dst));
        let (ssize, dsize) = (c.src.size_bytes(), c.dst.size_bytes());
        let padded = job.b_pad > 0;
        let WordTile {
            k,
            cols,
            ta,
            tb,
            pitch,
        } = self;
        let outer = &job.axes.outer;
        let (full, b_cells) = (g.extent, b.extent);
        let (na, nb) = (full.div_ceil(ta), b_cells.div_ceil(tb));
        let blocks = na * nb * outer.iter().map(|l| l.extent).product::<usize>();
        // Blocks of the tile along a (column groups) and b (row groups), and the lanes'
        // split of a warp between them.
        let (cg, rg) = (ta / cols, tb / k);
        let (lanes_a, lanes_b) = (32 / cols, cols);
        let units = cg * rg;
        let svt = vector_type(cols * ssize);
        let mut k_src = prelude(c);
        let kk = &mut k_src;
        let (name, fill_param) = if padded {
            ("tile", format!(", {d} fill"))
        } else {
            ("convert", String::new())
        };
        let _ = writeln!(
            kk,
            "extern \"C\" __global__ void {name}(const {s}* __restrict__ src, {d}* __restrict__ dst{fill_param}) {{"
        );
        let _ = writeln!(kk, "  __shared__ unsigned int smw[{}];", ta * pitch);
        let _ = writeln!(kk, "  const {it} blk = blockIdx.x;");
        let _ = writeln!(
            kk,
            "  const {it} tb = blk % {nb}{u}, ta = (blk / {nb}{u}) % {na}{u}, o = blk / {}{u};",
            na * nb
        );
        decode(kk, outer, "o", "  ", it, u);
        let _ = writeln!(
            kk,
            "  const {it} sbase = {}, dbase = {};",
            offset(outer, job.src_offset, true, u),
            offset(outer, job.dst_offset, false, u)
        );
        let _ = writeln!(kk, "  const {it} a0 = ta * {ta}{u}, b0 = tb * {tb}{u};");
        let _ = writeln!(kk, "  const unsigned int tid = threadIdx.x;");
        // Read, cast and transpose: unit q is block (ca, rb) of the tile.
        let _ = writeln!(
            kk,
            "  #pragma unroll\n  for (unsigned int i = 0; i < {}u; ++i) {{",
            units.div_ceil(THREADS)
        );
        let _ = writeln!(
            kk,
            "    const unsigned int q = tid + i * {THREADS}u, lane = q % 32u, wq = q / 32u;"
        );
        let _ = writeln!(
            kk,
            "    const unsigned int ca = lane % {lanes_a}u + (wq % {}u) * {lanes_a}u, rb = lane / {lanes_a}u + (wq / {}u) * {lanes_b}u;",
            cg / lanes_a,
            cg / lanes_a
        );
        let guard = if units.is_multiple_of(THREADS) {
            String::new()
        } else {
            format!("q < {units}u && ")
        };
        let _ = writeln!(
            kk,
            "    const {it} ea = a0 + ca * {cols}u, eb = b0 + rb * {k}u;"
        );
        let _ = writeln!(
            kk,
            "    if ({guard}ea < {full}{u} && eb < {b_cells}{u}) {{\n      union {{ {s} e[{cols}]; {svt} q; }} x[{k}];"
        );
        let _ = writeln!(
            kk,
            "      #pragma unroll\n      for (int r = 0; r < {k}; ++r) x[r].q = *(const {svt}*)(src + sbase + ea + (eb + r) * {}{u});",
            b.src_stride
        );
        let _ = writeln!(
            kk,
            "      #pragma unroll\n      for (int e = 0; e < {cols}; ++e) {{\n        union {{ {d} e[{k}]; unsigned int q; }} w;\n        #pragma unroll\n        for (int r = 0; r < {k}; ++r) w.e[r] = cast(x[r].e[e]);\n        smw[(ca * {cols}u + e) * {pitch}u + rb] = w.q;\n      }}\n    }}\n  }}"
        );
        kk.push_str("  __syncthreads();\n");
        // Write: destination rows of `tb / k` words, or with padding the whole row (data and
        // fill words).
        let words = if padded {
            (b_cells + job.b_pad) / k
        } else {
            tb / k
        };
        let (col, step) = walk(words, 1);
        let _ = writeln!(
            kk,
            "  #pragma unroll\n  for (unsigned int i = 0; i < {}u; ++i) {{",
            (words * ta).div_ceil(THREADS)
        );
        let _ = writeln!(kk, "    const unsigned int la = {step}, w = {col};");
        let wguard = if (words * ta).is_multiple_of(THREADS) {
            String::new()
        } else {
            format!("tid + i * {THREADS}u < {}u && ", words * ta)
        };
        let (row_end, value) = if padded {
            // The fill value in each of the word's k elements.
            let fill = (0..k)
                .map(|e| format!("((unsigned int)fill << {}u)", e * dsize * 8))
                .collect::<Vec<_>>()
                .join(" | ");
            (
                b_cells + job.b_pad,
                format!("w * {k}u < {b_cells}u ? smw[la * {pitch}u + w] : ({fill})"),
            )
        } else {
            (b_cells, format!("smw[la * {pitch}u + w]"))
        };
        let _ = writeln!(
            kk,
            "    if ({wguard}a0 + la < {full}{u} && b0 + w * {k}u < {row_end}{u})\n      *(unsigned int*)(dst + dbase + (a0 + la) * {}{u} + b0 + w * {k}u) = {value};\n  }}",
            g.dst_stride
        );
        kk.push_str("}\n");
        Launch {
            source: k_src,
            name,
            grid: (blocks.max(1) as u32, 1, 1),
            block: (THREADS as u32, 1, 1),
        }
    }
}

//! Transpositions with a short side of 2-4 cells ([`ThinTile`]): a pixel's few channels,
//! `NCHW -> NHWC` and `NCHW -> NCHW32c` with 3 or 4 channels, and `NHWC -> NCHW` with as
//! few.
//!
//! The element tile stages such a region as a strip of 3 or 4 long source rows and writes
//! destination rows of 3 or 4 elements from it: one shared access per element on each side,
//! and with 1-byte elements 1-byte shared accesses (H200, 32 MiB tensors: i8 `NCHW -> NHWC`
//! C=3 0.64-0.67 of the device copy, C=4 0.75-0.77; i8 `NCHW -> NCHW32c` C=3 and 4
//! 0.76-0.87, f32 -> i8 0.58-0.69; the casts into 2-byte elements with padding went to the
//! gather, f32 -> f16 0.56-0.77).
//!
//! Here each thread owns `v` consecutive cells of the long side (pixels) and moves them in
//! registers: on the long side it accesses one vector of each short row (a channel's `v`
//! pixels, 16 bytes), on the other the `v` pixels' interleaved chunk of `v * cells` elements.
//! Those chunks lie back to back in memory and go through shared memory, so that a warp's
//! global accesses there are consecutive vectors too: one vector access per 16 bytes on both
//! sides of shared memory, the chunks an odd number of vectors apart (no bank conflicts).
//! Padding after short destination rows (the 28 or 29 channels that complete an `NCHW32c`
//! block) is written as fill in the same pass, whatever the cast.

use std::fmt::Write;

use layoutkit_core::plan::LoopDim;

use super::super::{decode, index_type, offset, prelude, storage, vector_type, Launch};
use super::{widest, TileJob, SHARED_BYTES, THREADS};

/// The most cells on the short side.
const CELLS: usize = 4;

/// The most bytes of one thread's chunk (its registers, and with 256 threads the shared copy
/// under the static limit).
const CHUNK_BYTES: usize = 128;

/// A thin tile's geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ThinTile {
    /// Whether the short side is the destination rows (`b`: NCHW -> NHWC); else the source
    /// rows (`a`: NHWC -> NCHW).
    short_b: bool,
    /// Cells of the short side, and elements per short row (`cells` and the padding after it).
    cells: usize,
    row: usize,
    /// Cells of the long side and its strides: the short side's stride on its far layout (a
    /// channel's plane).
    long: usize,
    plane: isize,
    /// Long-side cells per thread and their vector on the long side (elements).
    v: usize,
    lv: usize,
    /// Vector of the chunks' side, in global and in shared memory (elements), and the distance
    /// of two threads' chunks in shared memory.
    cw: usize,
    sw: usize,
    stride: usize,
}

impl ThinTile {
    /// The thin tile of `job` when it has one: one source-contiguous loop, no units or tail
    /// cell, a short side of 2-4 cells whose rows lie back to back (padding only after
    /// destination rows), and a long side of at least half a block's cells.
    pub(super) fn of(job: &TileJob, a: &[LoopDim], b: &LoopDim) -> Option<ThinTile> {
        let c = job.cast;
        let (ssize, dsize) = (c.src.size_bytes(), c.dst.size_bytes());
        let [g] = a else { return None };
        if job.unit != 1 || job.a_tail > 0 || !job.tuning.thin || g.src_stride != 1 {
            return None;
        }
        let short = |n: usize| (2..=CELLS).contains(&n);
        let row_b = b.extent + job.b_pad;
        let (short_b, cells, row, long, plane) =
            if short(b.extent) && g.dst_stride == row_b as isize {
                (true, b.extent, row_b, g.extent, b.src_stride)
            } else if short(g.extent) && job.b_pad == 0 && b.src_stride == g.extent as isize {
                (false, g.extent, g.extent, b.extent, g.dst_stride)
            } else {
                return None;
            };
        // Long side: `long_size` bytes per element there, `chunk_size` in the chunks (the
        // destination type in shared memory when the short rows are the destination's).
        let (long_size, chunk_size) = if short_b {
            (ssize, dsize)
        } else {
            (dsize, ssize)
        };
        let mut v = (16 / long_size).max((16 / (cells * chunk_size)).next_power_of_two());
        while v > 1 && v * cells * chunk_size.max(long_size) > CHUNK_BYTES {
            v /= 2;
        }
        if long < THREADS * v / 2 {
            return None;
        }
        let outer = &job.axes.outer;
        let (long_vals, chunk_vals): (Vec<isize>, Vec<isize>) = if short_b {
            let mut l = vec![job.src_offset as isize, plane, v as isize];
            l.extend(outer.iter().map(|o| o.src_stride));
            let mut ch = vec![job.dst_offset as isize, (THREADS * v * row) as isize];
            ch.extend(outer.iter().map(|o| o.dst_stride));
            (l, ch)
        } else {
            let mut l = vec![job.dst_offset as isize, plane, v as isize];
            l.extend(outer.iter().map(|o| o.dst_stride));
            let mut ch = vec![job.src_offset as isize, (THREADS * v * row) as isize];
            ch.extend(outer.iter().map(|o| o.src_stride));
            (l, ch)
        };
        let lv = widest(long_size, 16, &long_vals);
        let chunk = v * cells;
        let sw = widest(chunk_size, 16, &[chunk as isize]);
        // Padded rows: a vector of the destination stays inside one row.
        let mut chunk_vals = chunk_vals;
        if row > cells {
            chunk_vals.push(row as isize);
        }
        let cw = widest(chunk_size, 16, &chunk_vals);
        // Unpadded, the vectors are read whole from one thread's chunk.
        let cw = if row > cells { cw } else { cw.min(sw) };
        let stride = if (chunk / sw).is_multiple_of(2) {
            chunk + sw
        } else {
            chunk
        };
        (THREADS * stride * chunk_size <= SHARED_BYTES).then_some(ThinTile {
            short_b,
            cells,
            row,
            long,
            plane,
            v,
            lv,
            cw,
            sw,
            stride,
        })
    }

    /// The kernel: `convert` (source, destination), or `tile` (and the fill value) with
    /// padding.
    pub(super) fn kernel(self, job: &TileJob) -> Launch {
        let c = job.cast;
        let (it, u) = index_type(job.small);
        let (s, d) = (storage(c.src), storage(c.dst));
        let (ssize, dsize) = (c.src.size_bytes(), c.dst.size_bytes());
        let ThinTile {
            short_b,
            cells,
            row,
            long,
            plane,
            v,
            lv,
            cw,
            sw,
            stride,
        } = self;
        let padded = row > cells;
        let outer = &job.axes.outer;
        let per_block = THREADS * v;
        let tiles = long.div_ceil(per_block);
        let blocks = tiles * outer.iter().map(|l| l.extent).product::<usize>();
        let chunk = v * cells;
        // The chunks' element type: the destination's with short destination rows (cast on
        // the way in), else the source's (cast on the way out).
        let (ct, csize) = if short_b { (d, dsize) } else { (s, ssize) };
        let (cvt, svt) = (vector_type(cw * csize), vector_type(sw * csize));
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
        let _ = writeln!(
            k,
            "  __shared__ __align__(16) {ct} sh[{}];",
            THREADS * stride
        );
        let _ = writeln!(k, "  const {it} blk = blockIdx.x;");
        let _ = writeln!(
            k,
            "  const {it} tl = blk % {tiles}{u}, o = blk / {tiles}{u};"
        );
        decode(&mut k, outer, "o", "  ", it, u);
        let _ = writeln!(
            k,
            "  const {it} sbase = {}, dbase = {};",
            offset(outer, job.src_offset, true, u),
            offset(outer, job.dst_offset, false, u)
        );
        let _ = writeln!(
            k,
            "  const unsigned int tid = threadIdx.x;\n  const {it} l0 = tl * {per_block}{u}, p0 = l0 + tid * {v}u;"
        );
        let _ = writeln!(
            k,
            "  const unsigned int np = ({long}{u} - l0 < {per_block}{u} ? {long}{u} - l0 : {per_block}{u}), n = np * {row}u;"
        );
        let _ = writeln!(
            k,
            "  union {{ {ct} e[{chunk}]; {svt} q[{}]; }} x;",
            chunk / sw
        );
        // The chunks' side: contiguous elements from `base`, `cw` at a time, element `f` of
        // it in shared memory at `(f / chunk) * stride + f % chunk`.
        let at = |f: &str| format!("({f} / {chunk}u) * {stride}u + {f} % {chunk}u");
        if short_b {
            // Long side in: each short row's `v` cells, cast into the chunk.
            let lvt = vector_type(lv * ssize);
            let _ = writeln!(k, "  if (p0 + {v}u <= {long}{u}) {{");
            let _ = writeln!(
                k,
                "    #pragma unroll\n    for (int c = 0; c < {cells}; ++c) {{\n      #pragma unroll\n      for (int q = 0; q < {}; ++q) {{\n        union {{ {s} e[{lv}]; {lvt} q; }} r;\n        r.q = *(const {lvt}*)(src + sbase + c * {plane}{u} + p0 + q * {lv}u);\n        #pragma unroll\n        for (int e = 0; e < {lv}; ++e) x.e[(q * {lv} + e) * {cells} + c] = cast(r.e[e]);\n      }}\n    }}",
                v / lv
            );
            let _ = writeln!(
                k,
                "  }} else {{\n    #pragma unroll\n    for (int p = 0; p < {v}; ++p) {{\n      #pragma unroll\n      for (int c = 0; c < {cells}; ++c) x.e[p * {cells} + c] = p0 + p < {long}{u} ? cast(src[sbase + c * {plane}{u} + p0 + p]) : ({d})0;\n    }}\n  }}"
            );
            let _ = writeln!(
                k,
                "  #pragma unroll\n  for (int q = 0; q < {}; ++q) *({svt}*)&sh[tid * {stride}u + q * {sw}u] = x.q[q];\n  __syncthreads();",
                chunk / sw
            );
            // Chunks out: whole destination rows, with their padding.
            let _ = writeln!(k, "  const {it} ds = dbase + l0 * {row}{u};");
            // A padded row's vector lies inside the row (`cw` divides it): its elements are
            // data up to `cells`, then fill.
            let padded_at = |f: &str| {
                format!(
                    "sh[{}]",
                    at(&format!("({f} / {row}u * {cells}u + {f} % {row}u)"))
                )
            };
            let _ = writeln!(
                k,
                "  for (unsigned int w = tid; w < n / {cw}u; w += {THREADS}u) {{\n    union {{ {d} e[{cw}]; {cvt} q; }} y;\n    const unsigned int f = w * {cw}u;"
            );
            if padded {
                let _ = writeln!(
                    k,
                    "    const unsigned int c0 = f % {row}u, h = f / {row}u * {cells}u + c0;\n    #pragma unroll\n    for (int e = 0; e < {cw}; ++e) y.e[e] = c0 + e < {cells}u ? sh[{}] : fill;",
                    at("(h + e)")
                );
            } else {
                let _ = writeln!(k, "    y.q = *(const {cvt}*)&sh[{}];", at("f"));
            }
            let _ = writeln!(k, "    *({cvt}*)(dst + ds + w * {cw}u) = y.q;\n  }}");
            let tail = if padded {
                format!("f % {row}u < {cells}u ? {} : fill", padded_at("f"))
            } else {
                format!("sh[{}]", at("f"))
            };
            let _ = writeln!(
                k,
                "  for (unsigned int f = n / {cw}u * {cw}u + tid; f < n; f += {THREADS}u) dst[ds + f] = {tail};\n}}"
            );
        } else {
            // Chunks in: the source rows of the block's cells, back to back.
            let _ = writeln!(k, "  const {it} ss = sbase + l0 * {row}{u};");
            let _ = writeln!(
                k,
                "  for (unsigned int w = tid; w < n / {cw}u; w += {THREADS}u) {{\n    const unsigned int f = w * {cw}u;\n    *({cvt}*)&sh[{}] = *(const {cvt}*)(src + ss + f);\n  }}",
                at("f")
            );
            let _ = writeln!(
                k,
                "  for (unsigned int f = n / {cw}u * {cw}u + tid; f < n; f += {THREADS}u) sh[{}] = src[ss + f];\n  __syncthreads();",
                at("f")
            );
            let _ = writeln!(
                k,
                "  #pragma unroll\n  for (int q = 0; q < {}; ++q) x.q[q] = *(const {svt}*)&sh[tid * {stride}u + q * {sw}u];",
                chunk / sw
            );
            // Long side out: each short row's `v` cells, cast.
            let lvt = vector_type(lv * dsize);
            let _ = writeln!(k, "  if (p0 + {v}u <= {long}{u}) {{");
            let _ = writeln!(
                k,
                "    #pragma unroll\n    for (int c = 0; c < {cells}; ++c) {{\n      #pragma unroll\n      for (int q = 0; q < {}; ++q) {{\n        union {{ {d} e[{lv}]; {lvt} q; }} y;\n        #pragma unroll\n        for (int e = 0; e < {lv}; ++e) y.e[e] = cast(x.e[(q * {lv} + e) * {cells} + c]);\n        *({lvt}*)(dst + dbase + c * {plane}{u} + p0 + q * {lv}u) = y.q;\n      }}\n    }}",
                v / lv
            );
            let _ = writeln!(
                k,
                "  }} else {{\n    #pragma unroll\n    for (int p = 0; p < {v}; ++p) {{\n      if (p0 + p < {long}{u}) {{\n        #pragma unroll\n        for (int c = 0; c < {cells}; ++c) dst[dbase + c * {plane}{u} + p0 + p] = cast(x.e[p * {cells} + c]);\n      }}\n    }}\n  }}\n}}"
            );
        }
        Launch {
            source: k,
            name,
            grid: (blocks.max(1) as u32, 1, 1),
            block: (THREADS as u32, 1, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::{ThinTile, CHUNK_BYTES};
    use layoutkit_core::DType;

    fn l(extent: usize, src_stride: isize, dst_stride: isize) -> LoopDim {
        LoopDim {
            extent,
            src_stride,
            dst_stride,
        }
    }

    /// `NCHW -> NHWC` (or `NCHW32c` with `pad`) of `c` channels on planes of `hw` pixels, and
    /// `NHWC -> NCHW` when `back`.
    fn job(cast: &CastSpec, c: usize, hw: usize, pad: usize, back: bool) -> TileJob<'_> {
        let row = (c + pad) as isize;
        let (a, b) = if back {
            (l(c, 1, hw as isize), l(hw, c as isize, 1))
        } else {
            (l(hw, 1, row), l(c, hw as isize, 1))
        };
        TileJob {
            src_offset: 0,
            dst_offset: 0,
            axes: TileAxes {
                outer: vec![l(5, (c * hw) as isize, row * hw as isize)],
                a: vec![a],
                b,
            },
            unit: 1,
            b_pad: pad,
            a_tail: 0,
            cast,
            small: true,
            tuning: Tuning::default(),
        }
    }

    fn thin(j: &TileJob) -> Option<ThinTile> {
        ThinTile::of(j, &j.axes.a, &j.axes.b)
    }

    /// 3 channels of bytes: each thread 16 pixels, one 16-byte load per channel, its
    /// 48-byte chunk through shared memory as three 16-byte vectors; the other way 4 channels,
    /// chunks of 64 bytes 80 apart; padded blocks of 32 halves from floats (f32 -> f16): the
    /// data then fill in each 16-byte store; 1 and 5 channels, planes shorter than half a
    /// block and thin tiles off: none.
    #[test]
    fn short_sides_move_in_registers() {
        let i8 = CastSpec::identity(DType::I8);
        let j = job(&i8, 3, 4096, 0, false);
        let t = thin(&j).expect("thin tile");
        assert_eq!(
            (t.short_b, t.v, t.lv, t.cw, t.stride),
            (true, 16, 16, 16, 48)
        );
        let k = tile_kernel(&j);
        assert_eq!(k.grid.0, 5);
        assert!(
            k.source
                .contains("r.q = *(const uint4*)(src + sbase + c * 4096u + p0 + q * 16u)"),
            "{}",
            k.source
        );
        assert!(
            k.source
                .contains("y.q = *(const uint4*)&sh[(f / 48u) * 48u + f % 48u]"),
            "{}",
            k.source
        );
        let j = job(&i8, 4, 4096, 0, true);
        let t = thin(&j).expect("thin tile");
        assert_eq!((t.short_b, t.v, t.stride), (false, 16, 80));
        assert!(tile_kernel(&j)
            .source
            .contains("*(uint4*)(dst + dbase + c * 4096u + p0 + q * 16u) = y.q"));
        let f32_f16 = CastSpec::new(DType::F32, DType::F16, None).unwrap();
        let j = job(&f32_f16, 4, 50176, 28, false);
        let k = tile_kernel(&j);
        assert_eq!(k.name, "tile");
        assert!(
            k.source.contains(
                "y.e[e] = c0 + e < 4u ? sh[((h + e) / 16u) * 24u + (h + e) % 16u] : fill"
            ),
            "{}",
            k.source
        );
        for (c, hw) in [(1, 4096), (5, 4096), (3, 1000)] {
            assert!(thin(&job(&i8, c, hw, 0, false)).is_none(), "{c} {hw}");
            assert!(thin(&job(&i8, c, hw, 0, true)).is_none(), "{c} {hw}");
        }
        let mut off = job(&i8, 3, 4096, 0, false);
        off.tuning.thin = false;
        assert!(thin(&off).is_none());
    }

    /// The geometry's contract over casts, channel counts, planes and padding: a chunk of at
    /// most `CHUNK_BYTES`, whole long-side vectors per thread, shared vectors that divide the
    /// chunk and lie an odd number of vectors apart, destination vectors inside one padded
    /// row, and the shared copy under the static limit.
    #[test]
    fn thin_geometry_holds_its_contract() {
        let casts = [
            CastSpec::identity(DType::I8),
            CastSpec::identity(DType::F16),
            CastSpec::identity(DType::F32),
            CastSpec::new(DType::F32, DType::I8, None).unwrap(),
            CastSpec::new(DType::F32, DType::F16, None).unwrap(),
            CastSpec::new(DType::I8, DType::F32, None).unwrap(),
        ];
        for cast in &casts {
            let (ssize, dsize) = (cast.src.size_bytes(), cast.dst.size_bytes());
            for c in 2..=4 {
                for hw in [2048, 2115, 4096, 9312, 50176] {
                    for (pad, back) in [(0, false), (32 - c, false), (0, true)] {
                        let j = job(cast, c, hw, pad, back);
                        let Some(t) = thin(&j) else { continue };
                        let chunk_size = if back { ssize } else { dsize };
                        let chunk = t.v * c;
                        assert!(
                            chunk * chunk_size.max(if back { dsize } else { ssize }) <= CHUNK_BYTES
                        );
                        assert!(
                            t.v.is_multiple_of(t.lv) && chunk.is_multiple_of(t.sw),
                            "{t:?}"
                        );
                        assert!((t.stride / t.sw) % 2 == 1 && t.stride >= chunk, "{t:?}");
                        assert!(t.row.is_multiple_of(t.cw) || pad == 0, "{t:?}");
                        assert!(pad > 0 || t.sw.is_multiple_of(t.cw), "{t:?}");
                        assert!(256 * t.stride * chunk_size <= 44 * 1024);
                        assert_eq!(t.row, c + pad);
                    }
                }
            }
        }
    }
}

//! The depthwise convolution kernel (groups = C = O, f16 in, f32 sums), which the direct kernel's
//! one-thread-per-output scheme runs at a third of cuDNN's speed: each thread computes
//! [`OUTPUTS_PER_THREAD`] consecutive output pixels of a row, holding the input columns they
//! share in registers (a 3x3 filter at stride 1 reads 6 columns per row for 4 outputs, not 12),
//! and its filter taps in registers. In NHWC a thread takes two adjacent channels (one 4-byte
//! load per input pixel, one store per output pixel for both) and consecutive threads take
//! consecutive channel pairs, so a warp's loads are one contiguous run, and where there are
//! threads enough a thread takes 2 or 4 output rows, which share the input rows they read
//! ([`rows_per_thread`]); in NCHW consecutive threads take consecutive groups of a row (two
//! rows per thread at stride 1 on planes of 14 rows or more) and store their outputs four or
//! two at a time where the row's width allows. The
//! epilogue (bias, ReLU, f16 or f32 output) is the direct kernel's. Same name and parameters as
//! [`super::direct_source`]'s `conv_direct`.

use std::fmt::Write;

use layoutkit_core::DType;

use super::{ConvKernel, ConvLayout};

/// Output pixels along W per thread.
pub const OUTPUTS_PER_THREAD: usize = 4;

/// Threads per block.
const THREADS: usize = 256;

/// Output pixels along W per thread: [`OUTPUTS_PER_THREAD`], but in NCHW at stride 1 along
/// W a whole row of 9 to 16 outputs where threads of four outputs would be
/// [`FOUR_ROWS_MIN_THREADS`] or more (one output row per thread then). Measured on an H200
/// (`bench/results/conv.md`): rows of 14 outputs per thread ran MobileNetV2's `dw 3x3 384 @14`
/// and `576 @14` 1.23-1.29x faster than four outputs and two rows at batch 32 and 64 (and
/// 0.78-1.0x at batch 8, under the threshold; at stride 2, 0.80x; 7 x 7 planes with 7 outputs
/// per thread 0.98-1.06x of four, not taken). `LAYOUTKIT_CONV_DW_COLS=N` (1 to 16) sets it in
/// NCHW for A/B runs.
fn outputs_per_thread(k: &ConvKernel) -> usize {
    let s = &k.shape;
    if k.layout != ConvLayout::Nchw {
        return OUTPUTS_PER_THREAD;
    }
    let forced = std::env::var("LAYOUTKIT_CONV_DW_COLS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|v| (1..=16).contains(v));
    if let Some(cols) = forced {
        return cols;
    }
    let whole_row = s.conv.stride[1] == 1
        && (OUTPUTS_PER_THREAD * 2 + 1..=16).contains(&s.ow)
        && threads_with(k, 1, OUTPUTS_PER_THREAD) >= FOUR_ROWS_MIN_THREADS;
    if whole_row {
        s.ow
    } else {
        OUTPUTS_PER_THREAD
    }
}

/// Whether `k` runs in this kernel: a depthwise convolution (groups = C = O) of f16 activations
/// in NHWC or NCHW.
pub fn depthwise_applies(k: &ConvKernel) -> bool {
    let s = &k.shape;
    k.input == DType::F16
        && s.conv.groups == s.c
        && s.o == s.c
        && s.c > 1
        && matches!(k.layout, ConvLayout::Nhwc | ConvLayout::Nchw)
        && k.out_layout == k.layout
}

/// Channels per thread: two in NHWC with C even (one 4-byte load per input pixel, one store
/// per output pixel), else one. Measured on an H200 (`bench/results/conv.md`): 4 or 8
/// channels per thread (8- and 16-byte loads) ran MobileNetV2's depthwise layers at 0.5-1.09x
/// of 2 (fewer threads, more registers each).
fn channels_per_thread(k: &ConvKernel) -> usize {
    if k.layout == ConvLayout::Nhwc && k.shape.c.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Threads of the kernel with one output row per thread, above which each thread takes two
/// rows ([`rows_per_thread`]).
pub const TWO_ROWS_MIN_THREADS: usize = 128_000;

/// Threads of the kernel with one output row per thread, above which each thread takes four.
pub const FOUR_ROWS_MIN_THREADS: usize = 300_000;

/// Output rows of a plane from which NCHW threads of four outputs take two rows: at stride 1
/// whatever the thread count, at stride 2 where one-row threads are
/// [`TWO_ROWS_MIN_THREADS`] or more. Measured on an H100 and an H200 (`bench/results/conv.md`):
/// at stride 1, 2 rows ran MobileNetV2's depthwise layers on 14 x 14 to 112 x 112 planes
/// 1.00-1.06x of one row at batch 1 and 1.05-1.29x at 8-64; at stride 2 (28 x 28 to 56 x 56
/// outputs) 0.95-0.98x at batch 1 and 1.00-1.08x at 8-64; on 7 x 7 planes, whose fourth pair
/// of rows is half empty, 0.64-0.78x; 4 rows no faster than 2 but on 56 x 56 and 112 x 112 at
/// batch 32-64.
pub const NCHW_TWO_ROWS_MIN_OH: usize = 14;

/// Output rows per thread: in NHWC at stride 1 along H, 4 where the kernel with one row per
/// thread has [`FOUR_ROWS_MIN_THREADS`] threads or more, 2 where it has
/// [`TWO_ROWS_MIN_THREADS`], else 1; in NCHW 2 on planes of [`NCHW_TWO_ROWS_MIN_OH`] rows or
/// more (at stride 2 with threads enough), else 1. A thread's rows share the input
/// rows their filter taps overlap on (a 3x3 filter reads 2 + R input rows for R output rows,
/// not 3R), at the cost of R times fewer threads. Measured on an H200 against one row, on
/// MobileNetV2's stride-1 depthwise layers at batch 1-64 (`bench/results/conv.md`): 2 rows
/// 1.03-1.40x where the one-row kernel had 128 K threads or more, 4 rows 1.15-1.46x from
/// 300 K, both 0.66-1.00x under 128 K; stride 2 0.81-1.18x.
/// `LAYOUTKIT_CONV_DW_ROWS=N` (1 to 8) sets it for A/B runs.
fn rows_per_thread(k: &ConvKernel) -> usize {
    let forced = std::env::var("LAYOUTKIT_CONV_DW_ROWS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|v| (1..=8).contains(v));
    if let Some(rows) = forced {
        return rows;
    }
    let stride = k.shape.conv.stride[0];
    if k.layout == ConvLayout::Nchw {
        let two = outputs_per_thread(k) == OUTPUTS_PER_THREAD
            && k.shape.oh >= NCHW_TWO_ROWS_MIN_OH
            && (stride == 1
                || stride == 2 && threads_with(k, 1, OUTPUTS_PER_THREAD) >= TWO_ROWS_MIN_THREADS);
        return if two { 2 } else { 1 };
    }
    if stride != 1 {
        return 1;
    }
    match threads_with(k, 1, OUTPUTS_PER_THREAD) {
        t if t >= FOUR_ROWS_MIN_THREADS => 4,
        t if t >= TWO_ROWS_MIN_THREADS => 2,
        _ => 1,
    }
}

/// Threads the kernel for `k` runs.
fn threads(k: &ConvKernel) -> usize {
    threads_with(k, rows_per_thread(k), outputs_per_thread(k))
}

/// Threads of the kernel for `k` with `rows` output rows and `cols` outputs of a row per
/// thread.
fn threads_with(k: &ConvKernel, rows: usize, cols: usize) -> usize {
    let s = &k.shape;
    s.n * s.oh.div_ceil(rows) * s.ow.div_ceil(cols) * (s.c / channels_per_thread(k))
}

/// Grid and block of the kernel for `k`.
pub fn depthwise_launch(k: &ConvKernel) -> ((u32, u32, u32), u32) {
    ((threads(k).div_ceil(THREADS) as u32, 1, 1), THREADS as u32)
}

/// NCHW rows read in vectors: the `body` columns a thread's outputs read from their own
/// aligned run of the row (`outputs_per_thread x stride` pixels from `ow0 x stride`, which is
/// where the columns it holds start once the padding is past), loaded in pieces of `piece`
/// pixels (8, 4 or 2: the largest dividing W and the run, so a piece never crosses the row's
/// end), the other columns one value at a time. `(run, piece)`; None where no such piece
/// exists or the run does not fit in the columns (the scalar loads then read every column).
fn nchw_body(k: &ConvKernel) -> Option<(usize, usize)> {
    let s = &k.shape;
    if k.layout != ConvLayout::Nchw {
        return None;
    }
    let (st, pd, dl) = (s.conv.stride[1], s.conv.padding[1], s.conv.dilation[1]);
    let cols = (outputs_per_thread(k) - 1) * st + (s.kw - 1) * dl + 1;
    let run = outputs_per_thread(k) * st;
    let piece = [8, 4, 2]
        .into_iter()
        .find(|&p| run.is_multiple_of(p) && s.w.is_multiple_of(p))?;
    (pd + run <= cols).then_some((run, piece))
}

/// The loads of one NCHW input row into `xv` with [`nchw_body`]'s pieces: zeros for pieces
/// past the row's end and for outside columns.
fn nchw_row_loads(k: &ConvKernel, (run, piece): (usize, usize), cols: usize) -> String {
    let s = &k.shape;
    let (st, pd) = (s.conv.stride[1], s.conv.padding[1]);
    let (vec_t, words) = match piece {
        8 => ("uint4", 4),
        4 => ("uint2", 2),
        _ => ("unsigned", 1),
    };
    let mut out = format!(
        "    const unsigned short* rp = x + (((long long)n * {} + c) * {} + ih) * {};\n",
        s.c, s.h, s.w
    );
    for q in 0..run / piece {
        let _ = writeln!(
            out,
            "    {{\n      const int b0 = ow0 * {st} + {};\n      const {vec_t} v = rok && b0 < {} ? *(const {vec_t}*)(rp + b0) : {vec_t}{{}};\n      const unsigned* u = (const unsigned*)&v;",
            q * piece,
            s.w
        );
        for e in 0..words {
            let j = pd + q * piece + 2 * e;
            let _ = writeln!(
                out,
                "      xv[{j}][0] = h2f((unsigned short)(u[{e}] & 0xFFFF)); xv[{}][0] = h2f((unsigned short)(u[{e}] >> 16));",
                j + 1
            );
        }
        out.push_str(
            "    }
",
        );
    }
    for j in (0..cols).filter(|&j| j < pd || j >= pd + run) {
        let _ = writeln!(
            out,
            "    {{ const int iw = iw0 + {j}; xv[{j}][0] = rok && iw >= 0 && iw < {} ? h2f(rp[iw]) : 0.f; }}",
            s.w
        );
    }
    out.trim_end().to_string()
}

/// How `values` outputs of type `out` are stored as one word: the word's type, the union
/// member holding it, the union member of one value and the value's expression (of `v`).
fn packed_word(
    out: DType,
    values: usize,
) -> (&'static str, &'static str, &'static str, &'static str) {
    let (lane, value) = if out == DType::F16 {
        ("h", "f2h(v)")
    } else {
        ("f", "v")
    };
    let (word, member) = match values * out.size_bytes() {
        4 => ("unsigned", "u"),
        8 => ("uint2", "d"),
        _ => ("uint4", "q"),
    };
    (word, member, lane, value)
}

/// CUDA source of `conv_direct(x, wt, y, bias)` for `k` (see the module).
///
/// Contract: `depthwise_applies(k)`.
pub fn depthwise_source(k: &ConvKernel) -> String {
    let s = &k.shape;
    let cv = channels_per_thread(k);
    let rows = rows_per_thread(k);
    let row_groups = s.oh.div_ceil(rows);
    let wt = outputs_per_thread(k);
    let (st, pd, dl) = (s.conv.stride, s.conv.padding, s.conv.dilation);
    let groups_w = s.ow.div_ceil(wt);
    let cols = (wt - 1) * st[1] + (s.kw - 1) * dl[1] + 1;
    let y_t = if k.out == DType::F16 {
        "unsigned short"
    } else {
        "float"
    };
    let mut src = String::from("// Generated by layoutkit-cuda (depthwise conv).\n");
    src.push_str(super::H2F);
    src.push_str(super::F2H);
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({THREADS}) conv_direct(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt, {y_t}* __restrict__ y, const float* __restrict__ bias) {{\n  const long long i = (long long)blockIdx.x * {THREADS} + threadIdx.x;\n  if (i >= {}ll) return;",
        threads(k)
    );
    match k.layout {
        ConvLayout::Nhwc => {
            let _ = writeln!(
                src,
                "  const int c = (int)(i % {cp}) * {cv}; long long q = i / {cp};\n  const int owg = (int)(q % {groups_w}); q /= {groups_w};\n  const int oh0 = (int)(q % {row_groups}) * {rows}, n = (int)(q / {row_groups});",
                cp = s.c / cv,
            );
        }
        _ => {
            let _ = writeln!(
                src,
                "  const {ix} ii = ({ix})i;\n  const int owg = (int)(ii % {groups_w}); {ix} q = ii / {groups_w};\n  const int oh0 = (int)(q % {row_groups}) * {rows}; q /= {row_groups};\n  const int c = (int)(q % {c}), n = (int)(q / {c});",
                c = s.c,
                // 32-bit division where the threads allow (a 64-bit one is a call).
                ix = if threads(k) < i32::MAX as usize { "int" } else { "long long" },
            );
        }
    }
    let taps = s.kh * s.kw;
    // The filter (OHWI with I = 1: channel c's taps are contiguous) and the sums.
    let _ = writeln!(
        src,
        "  float f[{taps}][{cv}], acc[{rows}][{wt}][{cv}];\n  #pragma unroll\n  for (int t = 0; t < {taps}; ++t)\n    #pragma unroll\n    for (int e = 0; e < {cv}; ++e) f[t][e] = h2f(wt[(c + e) * {taps} + t]);\n  #pragma unroll\n  for (int r = 0; r < {rows}; ++r)\n    #pragma unroll\n    for (int t = 0; t < {wt}; ++t)\n      #pragma unroll\n      for (int e = 0; e < {cv}; ++e) acc[r][t][e] = 0.f;\n  const int ow0 = owg * {wt}, iw0 = ow0 * {} - {};",
        st[1], pd[1]
    );
    let load = match (k.layout, cv) {
        (ConvLayout::Nhwc, 2) => format!(
            "const unsigned p = ok ? *(const unsigned*)(x + (((long long)n * {} + ih) * {} + iw) * {} + c) : 0u;\n        xv[j][0] = h2f((unsigned short)(p & 0xFFFF)); xv[j][1] = h2f((unsigned short)(p >> 16));",
            s.h, s.w, s.c
        ),
        (ConvLayout::Nhwc, _) => format!(
            "xv[j][0] = ok ? h2f(x[(((long long)n * {} + ih) * {} + iw) * {} + c]) : 0.f;",
            s.h, s.w, s.c
        ),
        _ => format!(
            "xv[j][0] = ok ? h2f(x[(((long long)n * {} + c) * {} + ih) * {} + iw]) : 0.f;",
            s.c, s.h, s.w
        ),
    };
    let row_loads = match nchw_body(k) {
        Some(body) => nchw_row_loads(k, body, cols),
        None => format!(
            "    #pragma unroll\n    for (int j = 0; j < {cols}; ++j) {{\n        const int iw = iw0 + j;\n        const bool ok = rok && iw >= 0 && iw < {};\n        {load}\n    }}",
            s.w
        ),
    };
    // One input row's products: the output row `out_row`'s sums over the filter row
    // `filter_row` (C expressions).
    let accumulate = |out_row: &str, filter_row: &str| {
        format!(
            "    #pragma unroll\n    for (int t = 0; t < {wt}; ++t)\n      #pragma unroll\n      for (int s = 0; s < {kw}; ++s)\n        #pragma unroll\n        for (int e = 0; e < {cv}; ++e) acc[{out_row}][t][e] += xv[t * {} + s * {}][e] * f[{filter_row} * {kw} + s][e];",
            st[1],
            dl[1],
            kw = s.kw,
        )
    };
    if rows == 1 {
        // One output row: the filter rows in a loop, rows outside the image skipped (as
        // measured: predicated zero loads ran stride-2 layers at 0.65-1.08x).
        let _ = writeln!(
            src,
            "  #pragma unroll\n  for (int r = 0; r < {kh}; ++r) {{\n    const int ih = oh0 * {} - {} + r * {};\n    if (ih < 0 || ih >= {h}) continue;\n    const bool rok = true;\n    float xv[{cols}][{cv}];\n{row_loads}\n{}\n  }}",
            st[0],
            pd[0],
            dl[0],
            accumulate("0", "r"),
            kh = s.kh,
            h = s.h,
        );
    }
    // Several output rows: each input row they read, once: row q (from `oh0 * stride -
    // padding`) feeds output row t through filter row r where t * stride + r * dilation = q.
    // Rows outside the image load zeros (predicated loads, no branch: the compiler may issue
    // every row's loads before the multiplies).
    let span = if rows == 1 {
        0
    } else {
        (rows - 1) * st[0] + (s.kh - 1) * dl[0] + 1
    };
    for q in 0..span {
        let uses: Vec<(usize, usize)> = (0..rows)
            .flat_map(|t| (0..s.kh).map(move |r| (t, r)))
            .filter(|&(t, r)| t * st[0] + r * dl[0] == q)
            .collect();
        if uses.is_empty() {
            continue;
        }
        let _ = writeln!(
            src,
            "  {{\n    const int ih = oh0 * {} - {} + {q};\n    const bool rok = ih >= 0 && ih < {h};\n    float xv[{cols}][{cv}];\n{row_loads}",
            st[0],
            pd[0],
            h = s.h,
        );
        for (t, r) in uses {
            let _ = writeln!(src, "{}", accumulate(&t.to_string(), &r.to_string()));
        }
        src.push_str("  }\n");
    }
    let bias = if k.bias { " + bias[c + e]" } else { "" };
    let relu = if k.relu {
        "\n        v = v < 0.f ? 0.f : v;"
    } else {
        ""
    };
    let store = if k.out == DType::F16 { "f2h(v)" } else { "v" };
    let at = match k.layout {
        ConvLayout::Nhwc => format!(
            "(((long long)n * {} + oh) * {} + ow) * {} + c + e",
            s.oh, s.ow, s.o
        ),
        _ => format!(
            "(((long long)n * {} + c + e) * {} + oh) * {} + ow",
            s.o, s.oh, s.ow
        ),
    };
    let _ = writeln!(
        src,
        "  #pragma unroll\n  for (int rr = 0; rr < {rows}; ++rr) {{\n  const int oh = oh0 + rr;\n  if (oh >= {}) break;",
        s.oh
    );
    if k.layout == ConvLayout::Nchw && s.ow.is_multiple_of(2) && wt.is_multiple_of(2) {
        // A row's outputs in stores of 4 (W a multiple of 4) or 2: each store stays inside
        // the row and on its own size's boundary.
        let pack = if s.ow.is_multiple_of(4) && wt.is_multiple_of(4) {
            4
        } else {
            2
        };
        let (word, member, lane, value) = packed_word(k.out, pack);
        let _ = writeln!(
            src,
            "  #pragma unroll\n  for (int t0 = 0; t0 < {wt}; t0 += {pack}) {{\n    if (ow0 + t0 >= {ow}) break;\n    union {{ uint4 q[1]; uint2 d[1]; unsigned u[1]; unsigned short h[{pack}]; float f[{pack}]; }} o;\n    #pragma unroll\n    for (int e = 0; e < {pack}; ++e) {{\n        float v = acc[rr][t0 + e][0]{bias0};{relu}\n        o.{lane}[e] = {value};\n    }}\n    *({word}*)(y + (((long long)n * {o} + c) * {oh} + oh) * {ow} + ow0 + t0) = o.{member}[0];\n  }}\n  }}\n}}",
            ow = s.ow,
            o = s.o,
            oh = s.oh,
            bias0 = if k.bias { " + bias[c]" } else { "" },
        );
        return src;
    }
    if k.layout == ConvLayout::Nhwc && cv == 2 {
        // A channel pair's two outputs in one store (4 bytes of f16, 8 of f32).
        let (word, member, lane, value) = packed_word(k.out, cv);
        let at = format!(
            "(((long long)n * {} + oh) * {} + ow) * {} + c",
            s.oh, s.ow, s.o
        );
        let _ = writeln!(
            src,
            "  #pragma unroll\n  for (int t = 0; t < {wt}; ++t) {{\n    const int ow = ow0 + t;\n    if (ow >= {}) break;\n    union {{ uint4 q[1]; uint2 d[1]; unsigned u[1]; unsigned short h[{cv}]; float f[{cv}]; }} o;\n    #pragma unroll\n    for (int e = 0; e < {cv}; ++e) {{\n        float v = acc[rr][t][e]{bias};{relu}\n        o.{lane}[e] = {value};\n    }}\n    *({word}*)(y + {at} + 0) = o.{member}[0];\n  }}\n  }}\n}}",
            s.ow,
        );
        return src;
    }
    let _ = writeln!(
        src,
        "  #pragma unroll\n  for (int t = 0; t < {wt}; ++t) {{\n    const int ow = ow0 + t;\n    if (ow >= {}) break;\n    #pragma unroll\n    for (int e = 0; e < {cv}; ++e) {{\n        float v = acc[rr][t][e]{bias};{relu}\n        y[{at}] = {store};\n    }}\n  }}\n  }}\n}}",
        s.ow
    );
    src
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::ConvShape;
    use layoutkit_core::conv::Conv2d;

    fn dw(c: usize, hw: usize, stride: usize, layout: ConvLayout) -> ConvKernel {
        let oh = (hw + 2 - 3) / stride + 1;
        ConvKernel {
            shape: ConvShape {
                n: 2,
                h: hw,
                w: hw,
                c,
                o: c,
                kh: 3,
                kw: 3,
                oh,
                ow: oh,
                conv: Conv2d {
                    stride: [stride; 2],
                    padding: [1; 2],
                    dilation: [1; 2],
                    groups: c,
                },
            },
            layout,
            out_layout: layout,
            input: DType::F16,
            out: DType::F16,
            bias: true,
            relu: true,
        }
    }

    #[test]
    fn threads_share_input_columns_and_take_channel_pairs_in_nhwc() {
        let k = dw(144, 56, 1, ConvLayout::Nhwc);
        assert!(depthwise_applies(&k));
        let src = depthwise_source(&k);
        assert!(
            src.contains("float xv[6][2];"),
            "4 outputs at stride 1 share 6 columns"
        );
        assert!(
            src.contains("*(const unsigned*)(x +") && src.contains("*(unsigned*)(y + "),
            "two channels in one load and one store"
        );
        // 2 x 56 rows x 14 groups of 4 x 72 channel pairs (one row per thread: 112 K).
        assert_eq!(threads(&k), 2 * 56 * 14 * 72);
        let s2 = depthwise_source(&dw(96, 112, 2, ConvLayout::Nhwc));
        assert!(
            s2.contains("float xv[9][2];"),
            "stride 2: 3 x 2 + 3 columns"
        );
        let mut f32_out = dw(16, 9, 1, ConvLayout::Nhwc);
        f32_out.out = DType::F32;
        let f = depthwise_source(&f32_out);
        assert!(
            f.contains("o.f[e] = v;") && f.contains("*(uint2*)(y + "),
            "{f}"
        );
        let odd = dw(15, 9, 1, ConvLayout::Nhwc);
        assert!(depthwise_source(&odd).contains("float xv[6][1];"));
        let nchw = depthwise_source(&dw(32, 20, 1, ConvLayout::Nchw));
        assert!(
            nchw.contains("const int owg = (int)(ii % 5); int q = ii / 5;"),
            "rows first in NCHW, 32-bit division"
        );
        // NCHW outputs in 8-byte stores of 4 (W = 20), 4-byte stores of 2 (W = 14), one at a
        // time for odd W; f32 in 16-byte stores.
        assert!(nchw.contains(
            "*(uint2*)(y + (((long long)n * 32 + c) * 20 + oh) * 20 + ow0 + t0) = o.d[0];"
        ));
        let pairs = depthwise_source(&dw(32, 14, 1, ConvLayout::Nchw));
        assert!(pairs.contains("t0 += 2") && pairs.contains("*(unsigned*)(y + "));
        let mut f32_nchw = dw(32, 20, 1, ConvLayout::Nchw);
        f32_nchw.out = DType::F32;
        assert!(depthwise_source(&f32_nchw).contains("= o.q[0];"));
        assert!(depthwise_source(&dw(32, 13, 1, ConvLayout::Nchw)).contains("y[(((long long)n"));
        // NCHW rows in vectors: a thread's run of 8 columns at stride 2 in one 16-byte load
        // (W = 112), its 4 at stride 1 in one 8-byte load, the halo one value at a time; odd
        // W one value at a time throughout.
        let v8 = depthwise_source(&dw(96, 112, 2, ConvLayout::Nchw));
        assert!(v8.contains("const uint4 v = ") && v8.contains("xv[0][0] = rok && iw >= 0"));
        let v4 = depthwise_source(&dw(32, 20, 1, ConvLayout::Nchw));
        assert!(v4.contains("const uint2 v = ") && v4.contains("xv[5][0] = rok && iw >= 0"));
        assert_eq!(nchw_body(&dw(32, 20, 1, ConvLayout::Nchw)), Some((4, 4)));
        assert_eq!(nchw_body(&dw(32, 13, 1, ConvLayout::Nchw)), None);
        assert_eq!(nchw_body(&dw(32, 14, 2, ConvLayout::Nchw)), Some((8, 2)));
        assert_eq!(nchw_body(&dw(32, 16, 1, ConvLayout::Nhwc)), None);
        let mut grouped = dw(32, 8, 1, ConvLayout::Nhwc);
        grouped.shape.conv.groups = 8;
        assert!(!depthwise_applies(&grouped));
        assert!(!depthwise_applies(&dw(32, 8, 1, ConvLayout::Nc32hw32)));
    }
}

#[cfg(test)]
mod row_tests {
    use super::*;

    /// Output rows per thread: 4 from 300 K one-row threads, 2 from 128 K, else 1; NHWC at
    /// stride 1 only. Four rows read 6 input rows, each feeding the output rows whose filter
    /// rows cover it.
    #[test]
    fn threads_take_output_rows_where_there_are_threads_enough() {
        let layer = |n, c, hw, stride, layout| {
            let mut k = crate::conv::test_kernel(n, c, hw, c, 3, DType::F16);
            k.shape.conv.groups = c;
            k.shape.conv.stride = [stride; 2];
            k.shape.oh = (hw - 1) / stride + 1;
            k.shape.ow = k.shape.oh;
            (k.layout, k.out_layout) = (layout, layout);
            k
        };
        // MobileNetV2's dw 3x3 144 @56: 8 x 56 x 14 x 72 = 452 K threads at batch 8.
        let big = layer(8, 144, 56, 1, ConvLayout::Nhwc);
        assert_eq!(
            (threads_with(&big, 1, 4), rows_per_thread(&big)),
            (451_584, 4)
        );
        assert_eq!(threads(&big), 8 * 14 * 14 * 72);
        // dw 3x3 192 @28 at batch 8: 150 K -> 2 rows; at batch 1: 19 K -> 1.
        assert_eq!(rows_per_thread(&layer(8, 192, 28, 1, ConvLayout::Nhwc)), 2);
        assert_eq!(rows_per_thread(&layer(1, 192, 28, 1, ConvLayout::Nhwc)), 1);
        assert_eq!(rows_per_thread(&layer(64, 144, 56, 2, ConvLayout::Nhwc)), 1);
        // NCHW: 2 rows at stride 1 from 14 x 14 planes at any batch, at stride 2 from 128 K
        // one-row threads; 7 x 7: 1. Rows of 14 at stride 1 one per thread from 300 K threads
        // of four.
        let nchw = |n, c, hw, stride| {
            let k = layer(n, c, hw, stride, ConvLayout::Nchw);
            (outputs_per_thread(&k), rows_per_thread(&k))
        };
        assert_eq!(nchw(64, 144, 56, 1), (4, 2));
        assert_eq!(nchw(1, 384, 14, 1), (4, 2));
        assert_eq!(nchw(8, 384, 14, 1), (4, 2), "172 K threads of four");
        assert_eq!(nchw(32, 384, 14, 1), (14, 1), "688 K threads of four");
        assert_eq!(nchw(64, 960, 7, 1), (4, 1));
        assert_eq!(nchw(64, 144, 56, 2), (4, 2));
        assert_eq!(nchw(1, 144, 56, 2), (4, 1), "28 K one-row threads");
        assert_eq!(
            nchw(64, 192, 28, 2),
            (4, 2),
            "14 x 14 outputs at stride 2: four"
        );
        let src = depthwise_source(&layer(32, 384, 14, 1, ConvLayout::Nchw));
        assert!(src.contains("acc[1][14][1]") && src.contains("t0 += 2"));
        let src = depthwise_source(&big);
        assert!(src.contains("acc[4][4][2]") && src.contains("const int ih = oh0 * 1 - 1 + 5;"));
        // Input row 2 feeds output rows 0, 1 and 2 through filter rows 2, 1 and 0.
        let row2 =
            &src[src.find("oh0 * 1 - 1 + 2;").unwrap()..src.find("oh0 * 1 - 1 + 3;").unwrap()];
        for (t, r) in [(0, 2), (1, 1), (2, 0)] {
            assert!(row2.contains(&format!(
                "acc[{t}][t][e] += xv[t * 1 + s * 1][e] * f[{r} * 3 + s][e]"
            )));
        }
        assert!(!row2.contains("acc[3]"));
    }
}

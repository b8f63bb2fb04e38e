//! The depthwise convolution kernel (groups = C = O, f16 in, f32 sums), which the direct kernel's
//! one-thread-per-output scheme runs at a third of cuDNN's speed: each thread computes
//! [`OUTPUTS_PER_THREAD`] consecutive output pixels of a row, holding the input columns they
//! share in registers (a 3x3 filter at stride 1 reads 6 columns per row for 4 outputs, not 12),
//! and its filter taps in registers. In NHWC a thread takes two adjacent channels (one 4-byte
//! load for both) and consecutive threads take consecutive channel pairs, so a warp's loads are
//! one contiguous run; in NCHW consecutive threads take consecutive groups of a row. The
//! epilogue (bias, ReLU, f16 or f32 output) is the direct kernel's. Same name and parameters as
//! [`super::direct_source`]'s `conv_direct`.

use std::fmt::Write;

use layoutkit_core::DType;

use super::{ConvKernel, ConvLayout};

/// Output pixels along W per thread.
pub const OUTPUTS_PER_THREAD: usize = 4;

/// Threads per block.
const THREADS: usize = 256;

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

/// Channels per thread: two in NHWC with C even (one 4-byte load), else one.
fn channels_per_thread(k: &ConvKernel) -> usize {
    if k.layout == ConvLayout::Nhwc && k.shape.c.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Threads the kernel for `k` runs.
fn threads(k: &ConvKernel) -> usize {
    let s = &k.shape;
    s.n * s.oh * s.ow.div_ceil(OUTPUTS_PER_THREAD) * (s.c / channels_per_thread(k))
}

/// Grid and block of the kernel for `k`.
pub fn depthwise_launch(k: &ConvKernel) -> ((u32, u32, u32), u32) {
    ((threads(k).div_ceil(THREADS) as u32, 1, 1), THREADS as u32)
}

/// NCHW rows read in vectors: the `body` columns a thread's outputs read from their own
/// aligned run of the row (`OUTPUTS_PER_THREAD x stride` pixels from `ow0 x stride`, which is
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
    let cols = (OUTPUTS_PER_THREAD - 1) * st + (s.kw - 1) * dl + 1;
    let run = OUTPUTS_PER_THREAD * st;
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
            "    {{\n      const int b0 = ow0 * {st} + {};\n      const {vec_t} v = b0 < {} ? *(const {vec_t}*)(rp + b0) : {vec_t}{{}};\n      const unsigned* u = (const unsigned*)&v;",
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
            "    {{ const int iw = iw0 + {j}; xv[{j}][0] = iw >= 0 && iw < {} ? h2f(rp[iw]) : 0.f; }}",
            s.w
        );
    }
    out.trim_end().to_string()
}

/// CUDA source of `conv_direct(x, wt, y, bias)` for `k` (see the module).
///
/// Contract: `depthwise_applies(k)`.
pub fn depthwise_source(k: &ConvKernel) -> String {
    let s = &k.shape;
    let cv = channels_per_thread(k);
    let wt = OUTPUTS_PER_THREAD;
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
                "  const int c = (int)(i % {cp}) * {cv}; long long q = i / {cp};\n  const int owg = (int)(q % {groups_w}); q /= {groups_w};\n  const int oh = (int)(q % {oh}), n = (int)(q / {oh});",
                cp = s.c / cv,
                oh = s.oh
            );
        }
        _ => {
            let _ = writeln!(
                src,
                "  const int owg = (int)(i % {groups_w}); long long q = i / {groups_w};\n  const int oh = (int)(q % {oh}); q /= {oh};\n  const int c = (int)(q % {c}), n = (int)(q / {c});",
                oh = s.oh,
                c = s.c
            );
        }
    }
    let taps = s.kh * s.kw;
    // The filter (OHWI with I = 1: channel c's taps are contiguous) and the sums.
    let _ = writeln!(
        src,
        "  float f[{taps}][{cv}], acc[{wt}][{cv}];\n  #pragma unroll\n  for (int t = 0; t < {taps}; ++t)\n    #pragma unroll\n    for (int e = 0; e < {cv}; ++e) f[t][e] = h2f(wt[(c + e) * {taps} + t]);\n  #pragma unroll\n  for (int t = 0; t < {wt}; ++t)\n    #pragma unroll\n    for (int e = 0; e < {cv}; ++e) acc[t][e] = 0.f;\n  const int ow0 = owg * {wt}, iw0 = ow0 * {} - {};",
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
            "    #pragma unroll\n    for (int j = 0; j < {cols}; ++j) {{\n        const int iw = iw0 + j;\n        const bool ok = iw >= 0 && iw < {};\n        {load}\n    }}",
            s.w
        ),
    };
    let _ = writeln!(
        src,
        "  #pragma unroll\n  for (int r = 0; r < {kh}; ++r) {{\n    const int ih = oh * {} - {} + r * {};\n    if (ih < 0 || ih >= {h}) continue;\n    float xv[{cols}][{cv}];\n{row_loads}\n    #pragma unroll\n    for (int t = 0; t < {wt}; ++t)\n      #pragma unroll\n      for (int s = 0; s < {kw}; ++s)\n        #pragma unroll\n        for (int e = 0; e < {cv}; ++e) acc[t][e] += xv[t * {} + s * {}][e] * f[r * {kw} + s][e];\n  }}",
        st[0],
        pd[0],
        dl[0],
        st[1],
        dl[1],
        kh = s.kh,
        kw = s.kw,
        h = s.h,
    );
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
        "  #pragma unroll\n  for (int t = 0; t < {wt}; ++t) {{\n    const int ow = ow0 + t;\n    if (ow >= {}) break;\n    #pragma unroll\n    for (int e = 0; e < {cv}; ++e) {{\n        float v = acc[t][e]{bias};{relu}\n        y[{at}] = {store};\n    }}\n  }}\n}}",
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
            src.contains("*(const unsigned*)(x +"),
            "two channels in one load"
        );
        // 2 x 56 rows x 14 groups of 4 x 72 channel pairs.
        assert_eq!(threads(&k), 2 * 56 * 14 * 72);
        let s2 = depthwise_source(&dw(96, 112, 2, ConvLayout::Nhwc));
        assert!(
            s2.contains("float xv[9][2];"),
            "stride 2: 3 x 2 + 3 columns"
        );
        let odd = dw(15, 9, 1, ConvLayout::Nhwc);
        assert!(depthwise_source(&odd).contains("float xv[6][1];"));
        let nchw = depthwise_source(&dw(32, 20, 1, ConvLayout::Nchw));
        assert!(
            nchw.contains("const int owg = (int)(i % 5);"),
            "rows first in NCHW"
        );
        // NCHW rows in vectors: a thread's run of 8 columns at stride 2 in one 16-byte load
        // (W = 112), its 4 at stride 1 in one 8-byte load, the halo one value at a time; odd
        // W one value at a time throughout.
        let v8 = depthwise_source(&dw(96, 112, 2, ConvLayout::Nchw));
        assert!(v8.contains("const uint4 v = ") && v8.contains("xv[0][0] = iw >= 0"));
        let v4 = depthwise_source(&dw(32, 20, 1, ConvLayout::Nchw));
        assert!(v4.contains("const uint2 v = ") && v4.contains("xv[5][0] = iw >= 0"));
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

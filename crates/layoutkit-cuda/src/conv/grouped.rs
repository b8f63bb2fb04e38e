//! Grouped convolution on tensor cores: each group is an implicit GEMM of its own (pixels x
//! the group's output channels, K = the filter's taps x the group's input channels), which a
//! block computes for [`GROUPED_ROWS`] output pixels and up to [`MAX_GROUP_COLUMNS`] of one
//! group's output channels with `mma.sync` m16n8k16 (f16 in, f32 sums), K walked 64 values
//! per stage in shared memory (four k16 steps): each stage's activations gathered from NHWC (a
//! tap's channels of the group in vectors of up to 8), the filter's rows (OHWI: an output
//! channel's K values are contiguous) beside them, the next stage's loaded into registers
//! while this one is multiplied.
//!
//! Why: the direct kernel (one thread per output) ran ResNeXt-50 32x4d's grouped 3x3 layers at
//! 0.6-2.5 TFLOP/s on an H200, 1-38% of cuDNN (`bench/results/conv.md`); a group of 4-32
//! channels is too narrow for the dense kernels' tiles, and wide enough that one thread per
//! output repeats each input load for every output channel of its group.
//!
//! Same name and parameters as [`super::direct_source`]'s `conv_direct`; 128 threads (four
//! warps of 16 rows each); the grid is (pixel tiles, groups x column tiles per group).

use std::fmt::Write;

use layoutkit_core::DType;

use super::{ConvKernel, ConvLayout};

/// Output pixels per block (four warps of 16 rows).
pub const GROUPED_ROWS: usize = 64;

/// The most output channels of a group one block computes.
pub const MAX_GROUP_COLUMNS: usize = 64;

/// Threads per block.
pub const GROUPED_THREADS: usize = 128;

/// K values per stage in shared memory (four `mma` k16 steps).
const CHUNK: usize = 64;

/// Whether `k` runs in this kernel: f16 activations and output (or f32 output) in NHWC, more
/// than one group and not depthwise (groups = C = O: [`super::depthwise_applies`]), tensors
/// under 2^31 elements (as the direct kernel).
pub fn grouped_applies(k: &ConvKernel) -> bool {
    let s = &k.shape;
    let g = s.conv.groups;
    k.input == DType::F16
        && matches!(k.out, DType::F16 | DType::F32)
        && k.layout == ConvLayout::Nhwc
        && k.out_layout == ConvLayout::Nhwc
        && g > 1
        && s.c.is_multiple_of(g)
        && s.o.is_multiple_of(g)
        && !super::depthwise_applies(k)
        && k.x_elements().max(k.y_elements()) < 1 << 31
        && std::env::var("LAYOUTKIT_CONV_GROUPED").as_deref() != Ok("0")
}

/// Groups a block takes together (a *super-group*: its GEMM's filter block-diagonal, zeros
/// between the groups, so a pixel's loads and stores span the super-group's channels): where
/// a group has under 8 channels, the fewest groups (dividing the groups) that have 8 or more;
/// else 1. Measured on an H200 (`bench/results/conv.md`): ResNeXt-50's groups of 4 channels
/// 1.4-1.7x with 2, 4 or 8 groups together; groups of 8 and more 0.2-1.02x (the
/// block-diagonal filter is gathered value by value). `LAYOUTKIT_CONV_GROUPED_S=N` (a divisor of the
/// groups) sets it for A/B runs.
fn supergroup(k: &ConvKernel) -> usize {
    let g = k.shape.conv.groups;
    let forced = std::env::var("LAYOUTKIT_CONV_GROUPED_S")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&v| v >= 1 && g.is_multiple_of(v));
    if let Some(sg) = forced {
        return sg;
    }
    let cg = k.shape.c / g;
    if cg >= 8 {
        return 1;
    }
    (1..=g)
        .find(|&sg| g.is_multiple_of(sg) && sg * cg >= 8)
        .unwrap_or(1)
}

/// Output channels of a block: the super-group's, rounded up to 8, at most
/// [`MAX_GROUP_COLUMNS`].
fn columns(k: &ConvKernel) -> usize {
    let os = k.shape.o / k.shape.conv.groups * supergroup(k);
    os.next_multiple_of(8).min(MAX_GROUP_COLUMNS)
}

/// Grid and block of the kernel for `k`.
pub fn grouped_launch(k: &ConvKernel) -> ((u32, u32, u32), u32) {
    let s = &k.shape;
    let sg = supergroup(k);
    let os = s.o / s.conv.groups * sg;
    let pixels = s.n * s.oh * s.ow;
    let column_tiles = os.div_ceil(columns(k));
    (
        (
            pixels.div_ceil(GROUPED_ROWS) as u32,
            (s.conv.groups / sg * column_tiles) as u32,
            1,
        ),
        GROUPED_THREADS as u32,
    )
}

/// The largest run of K values (1, 2, 4 or 8) that lies in one tap's channels and on its own
/// size's boundary wherever a thread's 8 values of a step start: the group's channel count's
/// largest power-of-two divisor up to 8, where the groups' and pixels' channels keep it
/// aligned.
fn activation_run(k: &ConvKernel) -> usize {
    let cg = k.shape.c / k.shape.conv.groups * supergroup(k);
    [8, 4, 2]
        .into_iter()
        .find(|&r| cg.is_multiple_of(r) && k.shape.c.is_multiple_of(r))
        .unwrap_or(1)
}

/// CUDA source of `conv_direct(x, wt, y, bias)` for `k` (see the module).
///
/// Contract: `grouped_applies(k)`.
pub fn grouped_source(k: &ConvKernel) -> String {
    let s = &k.shape;
    let g = s.conv.groups;
    let sg = supergroup(k);
    // The super-group's channels and outputs (`cg`, `og`), K (`kk`); a group's K (`kg`).
    let (cg, og) = (s.c / g * sg, s.o / g * sg);
    let (cg1, og1) = (s.c / g, s.o / g);
    let bn = columns(k);
    let column_tiles = og.div_ceil(bn);
    let kk = s.kh * s.kw * cg;
    let kg = s.kh * s.kw * cg1;
    let (st, pd, dl) = (s.conv.stride, s.conv.padding, s.conv.dilation);
    let pixels = s.n * s.oh * s.ow;
    let run = activation_run(k);
    let y_t = if k.out == DType::F16 {
        "unsigned short"
    } else {
        "float"
    };
    let brun = [8, 4, 2]
        .into_iter()
        .find(|&r| kk.is_multiple_of(r))
        .unwrap_or(1);
    let vec_t = |r: usize| match r {
        8 => "uint4",
        4 => "uint2",
        2 => "unsigned",
        _ => "unsigned short",
    };
    let zero = |r: usize| match r {
        8 => "uint4{}",
        4 => "uint2{}",
        2 => "(unsigned)0",
        _ => "(unsigned short)0",
    };
    let mut src = String::from("// Generated by layoutkit-cuda (grouped conv, mma.sync).\n");
    src.push_str(super::F2H);
    // Stage rows of CHUNK values padded by 8 (a warp's fragment loads fall in distinct banks).
    // Each thread loads half a row of the activations' chunk (and of the filter's, for the
    // first 2 x bn threads) into registers, the next chunk's while this one is multiplied.
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({GROUPED_THREADS}) conv_direct(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt, {y_t}* __restrict__ y, const float* __restrict__ bias) {{
  __shared__ __align__(16) unsigned short sa[{GROUPED_ROWS}][{pitch}];
  __shared__ __align__(16) unsigned short sb[{bn}][{pitch}];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tg = lane & 3;
  const int m0 = blockIdx.x * {GROUPED_ROWS}, grp = blockIdx.y / {column_tiles}, n0 = (blockIdx.y % {column_tiles}) * {bn};
  const int lr = tid >> 1, lk = (tid & 1) * {half};
  const int p = m0 + lr;
  const bool pv = p < {pixels};
  const int pn = p / {ohw}, pq = p % {ohw};
  const int ih0 = (pq / {ow}) * {sh} - {ph}, iw0 = (pq % {ow}) * {sw} - {pw};
  const unsigned short* xg = x + (long long)pn * {hwc} + grp * {cg};
  const int on = n0 + lr;
  const bool bl = tid < {bn2} && on < {og};
  const unsigned short* wr = wt + (long long)(grp * {og} + (bl ? on : 0)) * {kg};
  union {{ uint4 q[{half8}]; unsigned short h[{half}]; }} ra, rb;
  auto fetch = [&](int chunk) {{
    #pragma unroll
    for (int j = 0; j < {half}; j += {run}) {{
      const int kv = chunk * {CHUNK} + lk + j, tap = kv / {cg}, ci = kv % {cg};
      const int ih = ih0 + (tap / {kw}) * {dh}, iw = iw0 + (tap % {kw}) * {dw};
      const bool ok = pv && kv < {kk} && ih >= 0 && ih < {h} && iw >= 0 && iw < {w};
      *({at}*)&ra.h[j] = ok ? *(const {at}*)(xg + ((long long)ih * {w} + iw) * {c} + ci) : {az};
    }}
    {b_fetch}
  }};
  auto stage = [&]() {{
    #pragma unroll
    for (int j = 0; j < {half8}; ++j) *(uint4*)&sa[lr][lk + j * 8] = ra.q[j];
    if (tid < {bn2}) {{
      #pragma unroll
      for (int j = 0; j < {half8}; ++j) *(uint4*)&sb[lr][lk + j * 8] = rb.q[j];
    }}
  }};
  float acc[{nb}][4];
  #pragma unroll
  for (int i = 0; i < {nb}; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  fetch(0);
  stage();
  __syncthreads();
  for (int chunk = 0; chunk < {chunks}; ++chunk) {{
    if (chunk + 1 < {chunks}) fetch(chunk + 1);
    const int r = warp * 16 + g;
    #pragma unroll
    for (int kq = 0; kq < {CHUNK} / 16; ++kq) {{
      if (chunk * {CHUNK} + kq * 16 >= {kk}) break;
      const int c0 = kq * 16 + tg * 2;
      const unsigned a0 = *(const unsigned*)&sa[r][c0], a1 = *(const unsigned*)&sa[r + 8][c0];
      const unsigned a2 = *(const unsigned*)&sa[r][c0 + 8], a3 = *(const unsigned*)&sa[r + 8][c0 + 8];
      #pragma unroll
      for (int i = 0; i < {nb}; ++i) {{
        const unsigned b0 = *(const unsigned*)&sb[i * 8 + g][c0], b1 = *(const unsigned*)&sb[i * 8 + g][c0 + 8];
        asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"
          : \"+f\"(acc[i][0]), \"+f\"(acc[i][1]), \"+f\"(acc[i][2]), \"+f\"(acc[i][3])
          : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));
      }}
    }}
    if (chunk + 1 < {chunks}) {{
      __syncthreads();
      stage();
      __syncthreads();
    }}
  }}",
        pitch = CHUNK + 8,
        half = CHUNK / 2,
        half8 = CHUNK / 16,
        chunks = kk.div_ceil(CHUNK),
        at = vec_t(run),
        az = zero(run),
        ohw = s.oh * s.ow,
        ow = s.ow,
        sh = st[0],
        sw = st[1],
        ph = pd[0],
        pw = pd[1],
        dh = dl[0],
        dw = dl[1],
        h = s.h,
        w = s.w,
        c = s.c,
        kw = s.kw,
        hwc = s.h * s.w * s.c,
        nb = bn / 8,
        bn2 = bn * 2,
        kg = kg,
        b_fetch = if sg == 1 {
            format!("#pragma unroll\n    for (int j = 0; j < {half}; j += {brun}) {{\n      const int kv = chunk * {CHUNK} + lk + j;\n      *({bt}*)&rb.h[j] = bl && kv < {kk} ? *(const {bt}*)(wr + kv) : {bz};\n    }}", half = CHUNK / 2, bt = vec_t(brun), bz = zero(brun))
        } else {
            // Block-diagonal: output `on` of group on / og1 reads its group's channels only.
            format!("#pragma unroll\n    for (int j = 0; j < {half}; ++j) {{\n      const int kv = chunk * {CHUNK} + lk + j, tap = kv / {cg}, ci = kv % {cg};\n      rb.h[j] = bl && kv < {kk} && ci / {cg1} == on / {og1} ? wr[tap * {cg1} + ci % {cg1}] : (unsigned short)0;\n    }}", half = CHUNK / 2)
        },
    );
    // The epilogue: a thread's sums are rows g and g + 8 of its warp's 16, columns tg * 2 and
    // tg * 2 + 1 of each block of 8.
    let bias = if k.bias {
        format!(" + bias[grp * {og} + oc]")
    } else {
        String::new()
    };
    let relu = if k.relu {
        "\n          v = v < 0.f ? 0.f : v;"
    } else {
        ""
    };
    let store = if k.out == DType::F16 { "f2h(v)" } else { "v" };
    let _ = writeln!(
        src,
        "  #pragma unroll
  for (int i = 0; i < {nb}; ++i)
    #pragma unroll
    for (int hh = 0; hh < 2; ++hh) {{
      const int q = m0 + warp * 16 + g + hh * 8;
      if (q >= {pixels}) continue;
      #pragma unroll
      for (int e = 0; e < 2; ++e) {{
        const int oc = n0 + i * 8 + tg * 2 + e;
        if (oc < {og}) {{
          float v = acc[i][hh * 2 + e]{bias};{relu}
          y[(long long)q * {o} + grp * {og} + oc] = {store};
        }}
      }}
    }}
}}",
        nb = bn / 8,
        o = s.o,
    );
    src
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grouped(c: usize, o: usize, groups: usize, k: usize) -> ConvKernel {
        let mut kernel = crate::conv::test_kernel(2, c, 14, o, k, DType::F16);
        kernel.shape.conv.groups = groups;
        kernel
    }

    /// ResNeXt-50's grouped layers: 32 groups of 4 to 32 channels; a tap's channels in
    /// vectors of up to 8; columns the group's output channels rounded up to 8.
    #[test]
    fn groups_take_their_own_columns_and_vector_loads() {
        // Groups of 4 channels two at a time: 8 channels, 16-byte loads, a block-diagonal
        // filter of 8 columns over K = 72.
        let l1 = grouped(128, 128, 32, 3);
        assert!(grouped_applies(&l1));
        assert_eq!(supergroup(&l1), 2);
        assert_eq!((columns(&l1), activation_run(&l1)), (8, 8));
        assert_eq!(
            grouped_launch(&l1),
            (((2 * 14 * 14usize).div_ceil(64) as u32, 16, 1), 128)
        );
        let src = grouped_source(&l1);
        assert!(src.contains("*(uint4*)&ra.h[j] = ok ? *(const uint4*)(xg +"));
        assert!(src.contains("chunk < 2;"), "K = 72 in two stages of 64");
        assert!(src.contains("ci / 4 == on / 4 ? wr[tap * 4 + ci % 4]"));
        // Groups of 8: one at a time, filter rows of 72 in 16-byte loads.
        let l2 = grouped(256, 256, 32, 3);
        assert_eq!((supergroup(&l2), columns(&l2)), (1, 8));
        assert!(grouped_source(&l2).contains("*(uint4*)&rb.h[j] = bl && kv < 72"));
        // 3 channels per group, 5 groups: all 5 together (15 channels; 3 does not divide 5).
        assert_eq!(
            supergroup(&grouped(15, 30, 5, 3)),
            5,
            "the fewest dividing groups"
        );
        let l4 = grouped(1024, 1024, 32, 3);
        assert_eq!((columns(&l4), activation_run(&l4)), (32, 8));
        let src4 = grouped_source(&l4);
        assert!(src4.contains("*(uint4*)&ra.h[j] = ok ?") && src4.contains("chunk < 5;"));
        // 128 output channels per group: two column tiles of 64.
        let wide = grouped(256, 256, 2, 3);
        assert_eq!((columns(&wide), grouped_launch(&wide).0 .1), (64, 4));
        // Odd channels per group: one value at a time.
        let odd = grouped(15, 30, 5, 3);
        assert_eq!(activation_run(&odd), 1);
        assert!(grouped_source(&odd).contains("rb.h[j] = bl && kv < 135 &&"));
        let src = grouped_source(&odd);
        assert!(src.contains("*(unsigned short*)&ra.h[j] = ok ? *(const unsigned short*)(xg +"));
        assert!(src.contains(": (unsigned short)0;"));
        // Depthwise, NCHW and one group are not this kernel's.
        assert!(!grouped_applies(&grouped(64, 64, 64, 3)));
        assert!(!grouped_applies(&grouped(64, 64, 1, 3)));
        let mut nchw = l1;
        (nchw.layout, nchw.out_layout) = (ConvLayout::Nchw, ConvLayout::Nchw);
        assert!(!grouped_applies(&nchw));
    }
}

//! The Hopper kernels' multiplies ([`wgmma_function`], [`wgmma_step`]) and how the
//! `cp.async` Hopper kernel ([`super::hopper_source`]) walks the K dimension (filter taps x input
//! channels) and fills a stage's rows: every row of a stage is 128 bytes, 8 chunks of 16 bytes
//! (8 f16 or bf16 values, 16 int8 values: [`chunk_channels`]), stored with the 128-byte
//! swizzle.
//!
//! * [`HopperK::Taps`]: C a multiple of 8 chunks (64 f16 or 128 int8 channels) in NHWC or
//!   NC/32HW32. A K step is one tap and 8 chunks of channels; every chunk is 16 bytes of one
//!   pixel's channels, copied with `cp.async`.
//! * [`HopperK::Dense`]: fewer channels than a chunk (the stem's RGB images) with a filter
//!   of several taps, 2-byte inputs, NHWC or NC/32HW32: K is walked as the filter's (tap,
//!   channel) elements with no padding, 64 per step, so a chunk holds 8 consecutive elements
//!   of several taps (the stem: 147 elements in 3 steps, against 7 steps of chunks padded
//!   from 3 channels to 8), loaded element by element through registers like the chunks
//!   below. Measured on an H100 (the stem at batch 1-64, two alternations, GPU time;
//!   `bench/results/conv.md`): NHWC 1.05-1.10x. In NCHW, where a chunk's elements then lie in
//!   several channel planes instead of one pixel's few bytes, it ran 0.93-0.98x, so NCHW
//!   keeps the padded chunks; so do filters where the padded walk is less than
//!   [`MIN_DENSE_SAVING`] steps longer (3x3 filters of 3 channels: 2 steps against 1, and
//!   0.70-0.86x unpadded).
//! * [`HopperK::Chunks`]: any other channel count, and NCHW. K is walked as (tap, chunk of
//!   channels) with C rounded up to a whole chunk (the missing channels are zeros), and a K
//!   step is 8 consecutive chunks, so chunk `j` of step `t` is chunk `8t + j` of that order:
//!   one step spans several taps when C is small (the stem's C = 3 gives 8 taps per step, 7
//!   steps for a 7x7 filter, where a tap per step would be 49 steps of 3/64 useful work). The
//!   chunks are copied with `cp.async` where they are whole 16-byte runs (NHWC and NC/32HW32
//!   with C a multiple of a chunk), else loaded element by element through registers (f16 and
//!   bf16 only): issued before the step's multiplies and stored to shared memory after them
//!   are issued, so the loads' latency runs under the multiplies.

use std::fmt::Write;

use layoutkit_core::DType;

use super::source::{element_type, tap_pixel, w_offset};
use super::{ConvKernel, ConvLayout};

/// Channels in one 16-byte chunk of `k`'s input type: 8 f16 or bf16, 16 int8.
pub fn chunk_channels(k: &ConvKernel) -> usize {
    16 / k.input.size_bytes()
}

/// The K walk of the Hopper kernel for a problem (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HopperK {
    /// One tap and 8 chunks of channels (128 bytes) per K step.
    Taps,
    /// Eight chunks of channels per K step, each of its own (tap, channel chunk); through
    /// registers when `registers`, else `cp.async`.
    Chunks { registers: bool },
    /// 64 consecutive elements of the unpadded (tap, channel) order per K step, through
    /// registers.
    Dense,
}

impl HopperK {
    /// The walk for `k`.
    pub fn of(k: &ConvKernel) -> HopperK {
        let (c, per) = (k.shape.c, chunk_channels(k));
        if c % (8 * per) == 0 && k.layout != ConvLayout::Nchw {
            HopperK::Taps
        } else if c < per
            && k.shape.kh * k.shape.kw > 1
            && k.input.size_bytes() == 2
            && k.layout != ConvLayout::Nchw
            && padded_steps(k) >= HopperK::Dense.steps(k) + MIN_DENSE_SAVING
        {
            HopperK::Dense
        } else {
            HopperK::Chunks {
                registers: k.layout == ConvLayout::Nchw || c % per != 0,
            }
        }
    }

    /// K steps of the walk for `k`.
    pub fn steps(&self, k: &ConvKernel) -> usize {
        let (s, per) = (&k.shape, chunk_channels(k));
        match self {
            HopperK::Taps => s.kh * s.kw * s.c / (8 * per),
            HopperK::Chunks { .. } => (s.kh * s.kw * s.c.div_ceil(per)).div_ceil(8),
            HopperK::Dense => (s.kh * s.kw * s.c).div_ceil(8 * per),
        }
    }

    /// Whether the walk loads through registers (`fetch` and `put` of the register loader).
    pub fn registers(&self) -> bool {
        matches!(self, HopperK::Chunks { registers: true } | HopperK::Dense)
    }
}

/// Statements (in a loader taking K step `t`, a thread's chunk `lch`) that set `qv` (the
/// chunk is inside K), the chunk's tap `r`, `sx` and first channel `cc`.
fn chunk_tap(k: &mut String, kernel: &ConvKernel) {
    let (s, per) = (&kernel.shape, chunk_channels(kernel));
    let per_tap = s.c.div_ceil(per);
    let _ = writeln!(
        k,
        "    const int q = t * 8 + lch;\n    const bool qv = q < {};\n    const int rs = q / {per_tap}, cc = (q % {per_tap}) * {per}, r = rs / {kw}, sx = rs % {kw};",
        s.kh * s.kw * per_tap,
        kw = s.kw
    );
}

/// The C expression of the element offset of channel `{c}` (replaced by `c`) of input pixel
/// (`pn[i]`, `ih`, `iw`) in the activations' layout.
fn x_offset(kernel: &ConvKernel, c: &str) -> String {
    let s = &kernel.shape;
    match kernel.layout {
        ConvLayout::Nhwc => format!("((pn[i] * {} + ih) * {} + iw) * {} + {c}", s.h, s.w, s.c),
        ConvLayout::Nchw => format!("((pn[i] * {} + {c}) * {} + ih) * {} + iw", s.c, s.h, s.w),
        ConvLayout::Nc32hw32 => format!(
            "(((pn[i] * {} + ({c}) / 32) * {} + ih) * {} + iw) * 32 + ({c}) % 32",
            s.c.div_ceil(32),
            s.h,
            s.w
        ),
    }
}

/// The statements of the loader `load(t, st)` for [`HopperK::Chunks`] with `cp.async`: a
/// thread's `ar` activation chunks to `a_dst` and `br` filter chunks to `b_dst` (C
/// expressions of `i`, rows `lrow + i * step`), zero-filled outside the input, past O and
/// past K.
pub(super) fn chunk_async_loads(
    k: &mut String,
    kernel: &ConvKernel,
    (ar, br, step): (usize, usize, usize),
    a_dst: &str,
    b_dst: &str,
) {
    let s = &kernel.shape;
    let x_t = element_type(kernel.input);
    chunk_tap(k, kernel);
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {ar}; ++i) {{\n      {}\n      const {x_t}* ga = ok ? x + {} : x;\n      cp16({a_dst}, ga, ok ? 16 : 0);\n    }}",
        tap_pixel(kernel, "r", "sx", "qv"),
        x_offset(kernel, "cc"),
    );
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {br}; ++i) {{\n      const int oc = n0 + lrow + i * {step};\n      const bool ok = qv && oc < {o};\n      const {x_t}* gb = ok ? w + {} : w;\n      cp16({b_dst}, gb, ok ? 16 : 0);\n    }}",
        w_offset(kernel, "cc"),
        o = s.o,
    );
}

/// Declarations of the registers and the two halves of the register loader for
/// [`HopperK::Chunks`] through registers and [`HopperK::Dense`]: `fetch(t)` loads a thread's `ar` activation chunks
/// and `br` filter chunks of step `t` into registers (zeros outside the input, past C, past O
/// and past K), `put(st)` stores them to stage `st` (`a_dst` and `b_dst` as in
/// [`chunk_async_loads`], with `st` in them). Contract: 2-byte inputs (f16, bf16).
pub(super) fn register_loads(
    k: &mut String,
    kernel: &ConvKernel,
    (ar, br, step): (usize, usize, usize),
    a_dst: &str,
    b_dst: &str,
) {
    let _ = writeln!(
        k,
        "  unsigned short xa[{ar}][8], wb[{br}][8];\n  auto fetch = [&](int t) {{"
    );
    if HopperK::of(kernel) == HopperK::Dense {
        dense_fetch(k, kernel, (ar, br, step));
    } else {
        chunk_fetch(k, kernel, (ar, br, step));
    }
    let pack = |v: &str| {
        format!(
            "make_uint4({v}[i][0] | ((unsigned){v}[i][1] << 16), {v}[i][2] | ((unsigned){v}[i][3] << 16), {v}[i][4] | ((unsigned){v}[i][5] << 16), {v}[i][6] | ((unsigned){v}[i][7] << 16))"
        )
    };
    let _ = writeln!(
        k,
        "  auto put = [&](int st) {{\n    #pragma unroll\n    for (int i = 0; i < {ar}; ++i) *(uint4*)({a_dst}) = {};\n    #pragma unroll\n    for (int i = 0; i < {br}; ++i) *(uint4*)({b_dst}) = {};\n  }};",
        pack("xa"),
        pack("wb")
    );
}

/// One K step's multiplies, as both Hopper kernels issue them: a fence, the 32-byte slices of
/// the stage's `row`-byte rows (`sa`, `sb`; four of 128) for each of the warpgroup's `mr` row
/// blocks of 64 rows, a commit.
pub(super) fn wgmma_step(k: &mut String, mr: usize, row: usize) {
    k.push_str("    asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n");
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int kk = 0; kk < {}; ++kk) {{\n      #pragma unroll\n      for (int r = 0; r < {mr}; ++r) wgmma(&acc[r][0][0], sdesc(sa + r * {} + kk * 32), sdesc(sb + kk * 32));\n    }}",
        row / 32,
        64 * row
    );
    k.push_str("    asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n");
}

/// `wgmma` with the sums of `input` as a device function `wgmma(d, a_desc, b_desc)` adding
/// into `d[0 .. n/2]` (N = `n`): m64nNk16 with f32 sums for f16 and bf16, m64nNk32 with i32
/// sums for i8 (both 32 bytes of K per row, so one descriptor step serves both); and
/// `sdesc(p)`, the descriptor of the K-major tile at `p` whose rows are `row` bytes (128, 64 or
/// 32) stored with the swizzle of that width.
pub(super) fn wgmma_function(k: &mut String, n: usize, input: DType, row: usize) {
    let regs = n / 2;
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let (t, c, shape) = match input {
        DType::I8 => ("int", "r", format!("m64n{n}k32.s32.s8.s8")),
        DType::BF16 => ("float", "f", format!("m64n{n}k16.f32.bf16.bf16")),
        _ => ("float", "f", format!("m64n{n}k16.f32.f16.f16")),
    };
    // Integer wgmma has no operand scales or transposes: only the scale of D.
    let tail = if input == DType::I8 {
        "p"
    } else {
        "p, 1, 1, 0, 0"
    };
    let outs: Vec<String> = (0..regs).map(|i| format!("\"+{c}\"(d[{i}])")).collect();
    let _ = writeln!(
        k,
        "__device__ __forceinline__ void wgmma({t}* d, unsigned long long da, unsigned long long db) {{\n  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\nwgmma.mma_async.sync.aligned.{shape} {{{}}}, %{regs}, %{}, {tail};\\n}}\\n\"\n    : {}\n    : \"l\"(da), \"l\"(db), \"r\"(1));\n}}",
        regs + 2,
        list.join(", "),
        regs + 1,
        outs.join(", ")
    );
    // The shared-memory matrix descriptor of a K-major tile with the row's swizzle: start
    // address, leading offset 16 bytes (unused for swizzled K-major tiles), 8 rows between
    // groups of 8 rows (in units of 16 bytes), and the swizzle mode in bits 62-63 (1: 128
    // bytes, 2: 64, 3: 32).
    let mode = match row {
        128 => 1,
        64 => 2,
        _ => 3,
    };
    let _ = writeln!(
        k,
        "__device__ __forceinline__ unsigned long long sdesc(const unsigned char* p) {{\n\
  unsigned a; asm volatile(\"{{ .reg .u64 q; cvta.to.shared.u64 q, %1; cvt.u32.u64 %0, q; }}\" : \"=r\"(a) : \"l\"(p));\n\
  return (unsigned long long)((a & 0x3FFFF) >> 4) | (1ull << 16) | ({}ull << 32) | ({mode}ull << 62);\n}}",
        8 * row / 16
    );
}

/// This block's K steps `t0 .. t0 + nsteps`, as every Hopper kernel declares them: all `steps`
/// without a split, else split `blockIdx.z` of `splits` near-equal ranges.
pub(super) fn block_steps(k: &mut String, steps: usize, splits: usize) {
    if splits > 1 {
        let _ = writeln!(
            k,
            "  const int t0 = (int)((long long)blockIdx.z * {steps} / {splits}), nsteps = (int)((long long)(blockIdx.z + 1) * {steps} / {splits}) - t0;"
        );
    } else {
        let _ = writeln!(k, "  const int t0 = 0, nsteps = {steps};");
    }
}

/// `fetch(t)`'s body for [`HopperK::Chunks`] through registers (see [`register_loads`]).
fn chunk_fetch(k: &mut String, kernel: &ConvKernel, (ar, br, step): (usize, usize, usize)) {
    let s = &kernel.shape;
    chunk_tap(k, kernel);
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {ar}; ++i) {{\n      {}\n      #pragma unroll\n      for (int j = 0; j < 8; ++j) xa[i][j] = ok && cc + j < {c} ? x[{}] : (unsigned short)0;\n    }}",
        tap_pixel(kernel, "r", "sx", "qv"),
        x_offset(kernel, "cc + j"),
        c = s.c
    );
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {br}; ++i) {{\n      const int oc = n0 + lrow + i * {step};\n      const bool ok = qv && oc < {o};\n      #pragma unroll\n      for (int j = 0; j < 8; ++j) wb[i][j] = ok && cc + j < {c} ? w[{}] : (unsigned short)0;\n    }}\n  }};",
        w_offset(kernel, "cc + j"),
        o = s.o,
        c = s.c
    );
}

/// K steps of the padded chunk walk ([`HopperK::Chunks`]) for `k`.
fn padded_steps(k: &ConvKernel) -> usize {
    HopperK::Chunks { registers: true }.steps(k)
}

/// The fewest K steps the unpadded walk must save over the padded one to be taken: its loads
/// do more index arithmetic per element (each of a chunk's 8 elements finds its own tap and
/// its bounds). Measured on an H100 (fair benchmark, GPU time, batch 64): the 7x7 stem (7 ->
/// 3 steps) 70.4 -> 74.8 TFLOP/s; the 3x3 layers of 3 channels (2 -> 1 steps) slower,
/// MobileNetV2's 3x3/2 stem 25.2 -> 17.7 and VGG-16's `conv1_1` 41.1 -> 35.2.
const MIN_DENSE_SAVING: usize = 2;

/// `fetch(t)`'s body for [`HopperK::Dense`]: chunk `q = 8t + lch` holds K elements `8q ..
/// 8q + 7` of the filter's (tap, channel) order, each with its own tap `(r, sx)` and channel
/// (computed once per chunk for all of the thread's rows); zeros past K, outside the input
/// and past O. The filter (OHWI) holds that order contiguously: element `kk` of output
/// channel `oc` at `oc * K + kk`.
fn dense_fetch(k: &mut String, kernel: &ConvKernel, (ar, br, step): (usize, usize, usize)) {
    let s = &kernel.shape;
    let kk_all = s.kh * s.kw * s.c;
    let _ = writeln!(
        k,
        "    const int q = t * 8 + lch;\n    int dr[8], ds[8], dc[8];\n    bool dv[8];\n    #pragma unroll\n    for (int j = 0; j < 8; ++j) {{\n      const int kk = q * 8 + j, rs = kk / {c};\n      dv[j] = kk < {kk_all};\n      dc[j] = kk - rs * {c};\n      dr[j] = rs / {kw};\n      ds[j] = rs - dr[j] * {kw};\n    }}",
        c = s.c,
        kw = s.kw
    );
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {ar}; ++i) {{\n      #pragma unroll\n      for (int j = 0; j < 8; ++j) {{\n      {}\n        xa[i][j] = ok ? x[{}] : (unsigned short)0;\n      }}\n    }}",
        tap_pixel(kernel, "dr[j]", "ds[j]", "dv[j]"),
        x_offset(kernel, "dc[j]"),
    );
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {br}; ++i) {{\n      const int oc = n0 + lrow + i * {step};\n      #pragma unroll\n      for (int j = 0; j < 8; ++j) wb[i][j] = dv[j] && oc < {o} ? w[(long long)oc * {kk_all} + q * 8 + j] : (unsigned short)0;\n    }}\n  }};",
        o = s.o,
    );
}

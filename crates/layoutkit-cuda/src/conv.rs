//! Implicit-GEMM convolution with tensor cores, reading the activations in their own layout:
//! `out[pixel][o]` is the sum over `(r, s, c)` of `x[pixel shifted by (r, s)][c] times
//! w[o][r][s][c]`, with the filter in OHWI. Each block computes a tile of pixels x output
//! channels (128 x 128 with 256 threads, or smaller tiles for small problems), stepping K by 64
//! bytes of channels of one filter tap (32 f16 or 64 int8 channels) through shared-memory
//! stages; each warp owns 64 x 32 of the tile as 4 x 4 `mma.sync` fragments read with
//! `ldmatrix`.
//!
//! * Element types: f16 or bf16 inputs with f32 sums (`m16n8k16`; f16 or f32 output for f16,
//!   bf16 or f32 for bf16; optional bias and ReLU), or int8 inputs with i32 sums (`m16n8k32`:
//!   the exact i32 sums with optional ReLU, or requantised to i8 with a per-channel scale and
//!   bias, [`requant`]).
//! * Layouts ([`ConvLayout`]), the same for activations and output: NHWC and NC/32HW32 load
//!   16 consecutive bytes of channels per `cp.async` (a 64-byte K step is one pixel's
//!   channel block in NC/32HW32); NCHW has no run of channels, so each thread loads its
//!   pixel's 2-byte channels through registers (issued before the step's multiplies, stored
//!   after them) and the output is written channel plane by channel plane.
//!
//! Generated per problem (extents baked in as constants) and compiled with NVRTC for the
//! device's architecture (sm_80 or newer). On Hopper GPUs (sm_90) f16 and bf16 problems without
//! groups run the same implicit GEMM with warpgroup MMA ([`hopper_source`]): NHWC and
//! NC/32HW32 with any channel count, NCHW with channel counts the `mma.sync` kernel does not
//! take (the stem's three), K split among blocks where the output tiles are few
//! ([`splitk`]); NHWC layers of 4 K steps or more load their operands by TMA from a producer
//! warp instead of `cp.async` from every thread ([`tma`]). What the tensor-core kernels do not take (groups, depthwise, and before Hopper
//! channel counts that are not multiples of 32) runs in a direct kernel ([`direct_source`]: one
//! thread per output, f32 sums), depthwise layers in NHWC and NCHW in a kernel of their own
//! ([`depthwise_source`]: a run of outputs per thread sharing the input columns they read),
//! other grouped layers in NHWC in an implicit GEMM per group on `mma.sync`
//! ([`grouped_source`]) or, on Hopper GPUs where they have work enough, as super-groups of 64
//! channels (a block-diagonal filter) on the Hopper kernel ([`grouped_wgmma`]).

use layoutkit_core::conv::Conv2d;
use layoutkit_core::DType;

pub mod cluster;
mod depthwise;
mod direct;
mod grouped;
pub mod grouped_wgmma;
mod hopper;
mod hopper_k;
pub mod nchw_footprint;
pub mod nchw_loader;
pub mod nhwc_footprint;
pub mod persistent;
pub mod pointwise;
pub mod requant;
mod source;
pub mod space_to_depth;
pub mod splitk;
mod staged;
mod tile_rule;
pub mod tma;
pub mod tma_map;
pub mod wave_fill;
pub use depthwise::{depthwise_applies, depthwise_launch, depthwise_source, OUTPUTS_PER_THREAD};
pub use direct::{direct_grid, direct_source, direct_unsupported_reason, DIRECT_THREADS};
pub use grouped::{grouped_applies, grouped_launch, grouped_source};
pub use hopper::{hopper_source, hopper_unsupported_reason, HopperTile};
pub use hopper_k::HopperK;
pub use nchw_loader::{nchw_plan, nchw_unsupported_reason};
pub use requant::{channel_params, requantised};
pub use source::conv_source;
pub use tile_rule::{
    hopper_plan, hopper_plan_tuned, hopper_plan_with, hopper_tile, MAX_STEPS_WITHOUT_THE_WIDEST,
    MIN_TMA_STEPS,
};
pub use tma::{tma_applies, tma_unsupported_reason};

/// CUDA device function rounding an f32 to f16 bits (nearest even), shared by the kernels.
const F2H: &str = "__device__ __forceinline__ unsigned short f2h(float f) {\n\
  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n}\n";

/// CUDA device function widening f16 bits to an f32, shared by the direct kernels.
const H2F: &str = "__device__ __forceinline__ float h2f(unsigned short h) {\n\
  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n}\n";

/// CUDA device function rounding an f32 to bf16 bits (nearest even), shared by the kernels.
const F2BF: &str = "__device__ __forceinline__ unsigned short f2bf(float f) {\n\
  unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n}\n";

/// The problem one kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvShape {
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
    pub conv: Conv2d,
}

/// The layout of the activations and of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvLayout {
    Nhwc,
    Nchw,
    /// Channels in blocks of 32, each pixel's block contiguous (cuDNN's `NC/32HW32`).
    Nc32hw32,
}

impl ConvLayout {
    /// The layout's format name (as `layoutkit formats` writes it).
    pub fn format(&self) -> &'static str {
        match self {
            ConvLayout::Nhwc => "NHWC",
            ConvLayout::Nchw => "NCHW",
            ConvLayout::Nc32hw32 => "NC/32HW32",
        }
    }

    /// The layout with format name `name` (canonical or alias), if the kernel has it.
    pub fn from_format(name: &str) -> Option<ConvLayout> {
        let canonical = layoutkit_core::parse_format(name).ok()?.to_string();
        [ConvLayout::Nhwc, ConvLayout::Nchw, ConvLayout::Nc32hw32]
            .into_iter()
            .find(|l| {
                layoutkit_core::parse_format(l.format())
                    .map(|f| f.to_string() == canonical)
                    .unwrap_or(false)
            })
    }
}

/// One generated kernel: the problem, the layouts it reads and writes, the input element type
/// (f16, bf16 or i8; the filter has the same), the output element type (f16 or f32 for f16
/// inputs, bf16 or f32 for bf16, i32 (the exact sums) or i8 (requantised: per-channel scale,
/// [`requant`]) for i8) and the epilogue (bias, not for an i32 output; ReLU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvKernel {
    pub shape: ConvShape,
    /// The layout of the activations.
    pub layout: ConvLayout,
    /// The layout of the output: `layout`, or NCHW written by a kernel reading NHWC (the
    /// route NCHW activations take through NHWC, [`ConvKernel::for_problem`]; see
    /// [`out_layout_reason`] for which kernels write a layout other than the one they read).
    pub out_layout: ConvLayout,
    pub input: DType,
    pub out: DType,
    pub bias: bool,
    pub relu: bool,
}

/// NCHW activations are converted to NHWC (the kernel then writes NCHW itself) when the
/// convolution has at least this many FLOP per byte of activations and output
/// ([`ConvKernel::flop_per_converted_byte`]), else read in place. Fitted to the fair benchmark
/// on an H100 (`bench/results/conv.md`, ResNet-50, VGG-16 and MobileNetV2, batch 1, 8, 32 and
/// 64: the 180 layer-and-batch cases with C a multiple of 32, both routes timed): the chosen
/// route runs at a geometric mean of 0.966 of the faster one (64, fitted when the output was
/// converted back by a second pass, gives 0.91 on the same cases). Every 3x3 layer is above it;
/// below it are 1x1 layers that widen few channels (e.g. 32 -> 192 at batch 1 and 8), which
/// the NCHW kernel reads faster than the conversion costs.
pub const NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE: f64 = 12.0;

/// Grouped NCHW activations (not depthwise) are converted to NHWC where the convolution has at
/// least this many multiply-adds, whatever its FLOP per byte (which does not tell the two
/// routes apart here): read in place they run in the direct kernel (one thread per output),
/// through NHWC in the grouped tensor-core kernels, whose conversions cost a few launches.
/// The same rule on GPUs before Hopper, where NHWC runs in the per-group `mma.sync` kernel
/// (not measured there). Measured on an H200 (`bench/results/conv.md`, fair script,
/// ResNeXt-50's seven grouped layers, about 14.5 M multiply-adds per image): at batch 1 in
/// place 2.3-4.5 TFLOP/s, through NHWC 2.8-3.3 (in place faster on six); at batch 8 in place
/// 4.6-6.3, through NHWC 10.4-21.3.
pub const GROUPED_VIA_NHWC_MIN_MACS: usize = 50_000_000;

/// Tests' kernel: NHWC f16 activations on `hw` x `hw` planes, a `k` x `k` filter with stride 1
/// and the padding that keeps the plane (`k / 2`), `out` in NHWC, bias and ReLU.
#[cfg(test)]
pub(crate) fn test_kernel(
    n: usize,
    c: usize,
    hw: usize,
    o: usize,
    k: usize,
    out: DType,
) -> ConvKernel {
    ConvKernel {
        shape: ConvShape {
            n,
            h: hw,
            w: hw,
            c,
            o,
            kh: k,
            kw: k,
            oh: hw,
            ow: hw,
            conv: Conv2d {
                stride: [1; 2],
                padding: [k / 2; 2],
                dilation: [1; 2],
                groups: 1,
            },
        },
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input: DType::F16,
        out,
        bias: true,
        relu: true,
    }
}

/// Tests' NCHW problem: `n` images of `c` channels on `hw` (H, W) planes, `o` outputs, a `k` x
/// `k` filter with `(stride, padding, dilation)` on both axes, no groups.
#[cfg(test)]
pub(crate) fn test_nchw_shape(
    n: usize,
    c: usize,
    hw: (usize, usize),
    o: usize,
    k: usize,
    (stride, pad, dil): (usize, usize, usize),
) -> ConvShape {
    let out = |x: usize| (x + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    ConvShape {
        n,
        h: hw.0,
        w: hw.1,
        c,
        o,
        kh: k,
        kw: k,
        oh: out(hw.0),
        ow: out(hw.1),
        conv: Conv2d {
            stride: [stride; 2],
            padding: [pad; 2],
            dilation: [dil; 2],
            groups: 1,
        },
    }
}

/// Tests' kernel for `s` reading NCHW f16 and writing NCHW f16, with bias, no ReLU.
#[cfg(test)]
pub(crate) fn test_nchw_kernel(s: ConvShape) -> ConvKernel {
    ConvKernel {
        shape: s,
        layout: ConvLayout::Nchw,
        out_layout: ConvLayout::Nchw,
        input: DType::F16,
        out: DType::F16,
        bias: true,
        relu: false,
    }
}

impl ConvKernel {
    /// The kernel for a convolution of activations with logical dims `x_dims` (N, C, H, W) of
    /// type `x_dtype` in the layout `x_format` and a filter with dims `w_dims` (O, I, H, W) of
    /// type `w_dtype`; the rules the command line and the Python package share:
    ///
    /// * i8 activations and filter run the int8 kernel (exact i32 sums) with no bias (i32
    ///   output), or with `out` i8 (requantised with a per-channel scale, bias allowed; the
    ///   scale is given at launch); bf16 activations the bf16 kernel; everything else the f16
    ///   kernel (operands rounded to f16 when they are of another type), both with f32 sums;
    /// * the kernel reads the activations in `x_format` when it has that layout (NHWC, NCHW,
    ///   NC/32HW32), else in NHWC, and writes its output in the same layout; NCHW activations
    ///   of a problem a tensor-core kernel takes (the grouped one, [`grouped_applies`],
    ///   included) are planned through NHWC (converted first) when the convolution has enough
    ///   work to hide the conversion ([`NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE`], or for grouped
    ///   layers [`GROUPED_VIA_NHWC_MIN_MACS`]; bf16 grouped layers, which only the Hopper
    ///   super-groups take, always), and a dense kernel
    ///   writes NCHW itself (the grouped kernel's output is converted back), except where
    ///   GPU 0 is a Hopper (sm_90) and the NCHW footprint kernel is the faster way
    ///   ([`nchw_footprint::footprint_planned`]: read in place); int8 never reads NCHW;
    /// * `y_format`, where given, is the layout the caller wants the output in (else
    ///   `x_format`): an f16/bf16 tensor-core kernel reading NHWC writes NCHW directly when
    ///   asked (no conversion pass after it); other requests leave the output in the
    ///   kernel's input layout for the caller to convert;
    /// * the output type is `out` when the kernel writes it (f16 or f32 for f16, bf16 or f32
    ///   for bf16, i32 or i8 for int8), else f32 (i32 for int8); the caller converts from
    ///   there.
    ///
    /// Errors: dims that do not make a convolution (see [`Conv2d::output_dims`]).
    #[allow(clippy::too_many_arguments)]
    pub fn for_problem(
        conv: &Conv2d,
        x_dims: &layoutkit_core::Dims,
        x_format: &str,
        x_dtype: DType,
        w_dims: &layoutkit_core::Dims,
        w_dtype: DType,
        bias: bool,
        relu: bool,
        out: Option<DType>,
        y_format: Option<&str>,
    ) -> Result<ConvKernel, layoutkit_core::Error> {
        let y_dims = conv.output_dims(x_dims, w_dims)?;
        let int8 =
            x_dtype == DType::I8 && w_dtype == DType::I8 && (!bias || out == Some(DType::I8));
        let input = if int8 {
            DType::I8
        } else if x_dtype == DType::BF16 {
            DType::BF16
        } else {
            DType::F16
        };
        let layout = ConvLayout::from_format(x_format)
            .filter(|l| !(int8 && *l == ConvLayout::Nchw))
            .unwrap_or(ConvLayout::Nhwc);
        let out = match (input, out) {
            (DType::I8, Some(DType::I8)) => DType::I8,
            (DType::I8, _) => DType::I32,
            (DType::F16, Some(DType::F16)) => DType::F16,
            (DType::BF16, Some(DType::BF16)) => DType::BF16,
            _ => DType::F32,
        };
        let get = |d: &layoutkit_core::Dims, l: char| {
            layoutkit_core::Axis::from_letter(l)
                .and_then(|a| d.get(a))
                .unwrap_or(0)
        };
        let mut kernel = ConvKernel {
            shape: ConvShape {
                n: get(x_dims, 'N'),
                h: get(x_dims, 'H'),
                w: get(x_dims, 'W'),
                c: get(x_dims, 'C'),
                o: get(w_dims, 'O'),
                kh: get(w_dims, 'H'),
                kw: get(w_dims, 'W'),
                oh: get(&y_dims, 'H'),
                ow: get(&y_dims, 'W'),
                conv: *conv,
            },
            layout,
            out_layout: layout,
            input,
            out,
            bias,
            relu,
        };
        let nhwc = ConvKernel {
            layout: ConvLayout::Nhwc,
            out_layout: ConvLayout::Nhwc,
            ..kernel
        };
        let enough = nhwc.flop_per_converted_byte() >= NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE;
        let dense = unsupported_reason(&nhwc).is_none() && enough;
        // Grouped: through NHWC where it has work enough, or where no kernel reads the NCHW
        // problem in place but the super-groups take the NHWC one (bf16).
        let grouped = (grouped_applies(&nhwc) && nhwc.macs() >= GROUPED_VIA_NHWC_MIN_MACS)
            || (direct_unsupported_reason(&kernel).is_some()
                && grouped_wgmma::grouped_wgmma_unsupported_reason(&nhwc).is_none());
        if kernel.layout == ConvLayout::Nchw
            && (dense || grouped)
            && !nchw_footprint::footprint_planned(&kernel)
        {
            kernel = nhwc;
        }
        let wanted = ConvLayout::from_format(y_format.unwrap_or(x_format));
        if let Some(wanted) = wanted {
            let other = ConvKernel {
                out_layout: wanted,
                ..kernel
            };
            if out_layout_reason(&other).is_none() {
                kernel = other;
            }
        }
        Ok(kernel)
    }

    /// FLOP (2 x MACs) per byte that converting the activations to NHWC and the output back
    /// would move (each read once and written once): how much convolution work there is to
    /// hide conversions behind (the measure [`NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE`] was fitted on,
    /// with the output written NCHW by the kernel).
    pub fn flop_per_converted_byte(&self) -> f64 {
        let s = &self.shape;
        let macs = self.macs();
        let x = s.n * s.c * s.h * s.w * self.input.size_bytes();
        let y = s.n * s.o * s.oh * s.ow * self.out.size_bytes();
        2.0 * macs as f64 / (2 * (x + y)).max(1) as f64
    }

    /// Multiply-adds of the convolution (groups counted).
    pub fn macs(&self) -> usize {
        let s = &self.shape;
        s.n * s.o * s.oh * s.ow * s.kh * s.kw * (s.c / s.conv.groups.max(1))
    }

    /// Elements of the OHWI filter (I = C / groups).
    pub fn w_elements(&self) -> usize {
        let s = &self.shape;
        s.o * s.kh * s.kw * (s.c / s.conv.groups.max(1))
    }

    /// Elements of the activations in `layout` (NC/32HW32 pads C to whole blocks).
    pub fn x_elements(&self) -> usize {
        let s = &self.shape;
        layout_elements(self.layout, s.n, s.c, s.h, s.w)
    }

    /// Elements of the output in `out_layout` (NC/32HW32 pads O to whole blocks).
    pub fn y_elements(&self) -> usize {
        let s = &self.shape;
        layout_elements(self.out_layout, s.n, s.o, s.oh, s.ow)
    }

    /// Channels per K step: 64 bytes of them.
    pub fn step_channels(&self) -> usize {
        64 / self.input.size_bytes()
    }
}

/// Elements of an `n x c x h x w` tensor in `layout` (NC/32HW32 pads C to whole blocks).
fn layout_elements(layout: ConvLayout, n: usize, c: usize, h: usize, w: usize) -> usize {
    let c = if layout == ConvLayout::Nc32hw32 {
        c.div_ceil(32) * 32
    } else {
        c
    };
    n * c * h * w
}

/// Why the tensor-core kernels cannot write `k`'s output in `k.out_layout`, or None when they
/// can: each writes the layout it reads, and the f16/bf16 ones (`mma.sync`, Hopper, split K)
/// reading NHWC also write NCHW (each epilogue computes its output offsets from
/// `out_layout`). Part of [`unsupported_reason`] and [`hopper_unsupported_reason`]. The direct
/// kernel writes any of the layouts; depthwise layers' kernel the layout it reads.
pub fn out_layout_reason(k: &ConvKernel) -> Option<String> {
    if k.out_layout == k.layout {
        return None;
    }
    let route = k.layout == ConvLayout::Nhwc
        && k.out_layout == ConvLayout::Nchw
        && matches!(k.input, DType::F16 | DType::BF16);
    if !route
        || unsupported_reason(&ConvKernel {
            out_layout: k.layout,
            ..*k
        })
        .is_some()
    {
        return Some(format!(
            "the CUDA kernels write the layout they read ({}), or NCHW from an f16/bf16 \
             tensor-core kernel reading NHWC; not {} from {} {}",
            k.layout.format(),
            k.out_layout.format(),
            k.input,
            k.layout.format()
        ));
    }
    None
}

/// Why the tensor-core kernel does not take a problem, or None when it does.
pub fn unsupported_reason(k: &ConvKernel) -> Option<String> {
    let s = &k.shape;
    if s.conv.groups != 1 {
        return Some(
            "grouped convolution (groups > 1) runs in the grouped or direct kernel, not the \
             dense tensor-core ones"
                .into(),
        );
    }
    match (k.input, k.out) {
        (DType::F16, DType::F16 | DType::F32) => {}
        (DType::BF16, DType::BF16 | DType::F32) => {}
        (DType::I8, DType::I32 | DType::I8) => {}
        (i, o) => {
            return Some(format!(
                "the CUDA kernel takes f16 inputs (f16 or f32 output), bf16 (bf16 or f32) or \
                 i8 (i32 or requantised i8 output), not {i} -> {o}"
            ))
        }
    }
    if let Some(why) = int8_reason(k) {
        return Some(why);
    }
    let kc = k.step_channels();
    if !s.c.is_multiple_of(kc) {
        return Some(format!(
            "the CUDA kernel needs C to be a multiple of {kc} for {} inputs (C = {})",
            k.input, s.c
        ));
    }
    if k.layout == ConvLayout::Nc32hw32 && !s.o.is_multiple_of(32) {
        return Some(format!(
            "an NC/32HW32 output needs O to be a multiple of 32 (O = {})",
            s.o
        ));
    }
    let elems = [
        s.n * s.h * s.w * s.c,
        s.o * s.kh * s.kw * s.c,
        s.n * s.oh * s.ow * s.o,
    ];
    if elems.iter().any(|&e| e >= 1 << 31) {
        return Some("tensors of 2^31 elements or more are not in the CUDA kernel yet".into());
    }
    out_layout_reason(k)
}

/// Why the int8 kernels do not take `k` (its channel count aside), or None: they read NHWC
/// or NC/32HW32, and a bias needs the requantised (i8) output (the i32 output is the exact
/// sums).
fn int8_reason(k: &ConvKernel) -> Option<String> {
    if k.input != DType::I8 {
        return None;
    }
    if k.layout == ConvLayout::Nchw {
        return Some("int8 convolution on the GPU reads NHWC or NC/32HW32, not NCHW".into());
    }
    (k.bias && k.out == DType::I32).then(|| {
        "int8 convolution on the GPU adds a bias only when requantising to i8 (its i32 output \
         is the exact sums)"
            .into()
    })
}

/// Streaming multiprocessors assumed when choosing tiles (the H100 has 132, the H200 132).
const SMS: usize = 132;

/// The block tile (pixels x output channels), shared-memory stages and threads for `s`, with
/// warps of 64 x 32 each: 256 x 64 with two stages when O <= 64 (a 128-channel tile would
/// compute half zeros); 128 x 128 with three stages, 8 warps; or, when 128 x 128 tiles would not
/// give every SM two blocks (the 7 x 7 and 14 x 14 layers), 128 x 64 (4 warps) or 64 x 64
/// (2 warps) with four stages (bench/results/raw/conv-2026-11-22-h100-tiles-ab.txt).
fn tile(s: &ConvShape) -> (usize, usize, usize, usize) {
    let m = s.n * s.oh * s.ow;
    if s.o <= 64 {
        (256, 64, 2, 256)
    } else if m.div_ceil(128) * s.o.div_ceil(128) < 2 * SMS {
        // Four stages (48 KB of static shared memory) measured 2-5% faster than three on the
        // H100 for these layers; 64 x 64 tiles where even 128 x 64 ones leave SMs idle.
        if m.div_ceil(128) * s.o.div_ceil(64) < 2 * SMS {
            (64, 64, 4, 64)
        } else {
            (128, 64, 4, 128)
        }
    } else {
        (128, 128, 3, 256)
    }
}

/// Threads per block of the kernel for `s`.
pub fn block(s: &ConvShape) -> u32 {
    tile(s).3 as u32
}

/// Grid of the kernel for `s`.
pub fn grid(s: &ConvShape) -> (u32, u32, u32) {
    let m = s.n * s.oh * s.ow;
    let (bm, bn, _, _) = tile(s);
    (m.div_ceil(bm) as u32, s.o.div_ceil(bn) as u32, 1)
}

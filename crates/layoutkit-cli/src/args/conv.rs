//! The arguments of `layoutkit conv` and `layoutkit conv bench`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::Device;

/// `conv X W Y ...` runs one convolution; `conv bench ...` times a layer list.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ConvCommand {
    #[command(subcommand)]
    pub bench: Option<ConvSubcommand>,
    #[command(flatten)]
    pub run: ConvArgs,
}

#[derive(Subcommand, Debug)]
pub enum ConvSubcommand {
    /// Time the fast convolution per layer and activation layout: TFLOP/s and bytes moved.
    #[command(after_help = "\
Layers: the distinct convolutions of ResNet-50, VGG-16 and/or MobileNetV2 (--net; 224 x 224
input; MobileNetV2's depthwise layers have groups = C), or your own (--layer), at --batch. Each layer runs with its activations and output in each of --layouts (the filter is
packed once per layer, outside the timing, as an engine keeps packed weights; the output
buffer is allocated once per layout, as an engine plans its activation memory); FLOP = 2 x MACs; `MiB moved` is the activations, filter and output
in that layout (padding included), read or written once. The median of --repeats timed runs
after a warm-up is reported.

Examples:
  layoutkit conv bench --batch 1
  layoutkit conv bench --net vgg16 --threads 2 --kernels avx2 --json
  layoutkit conv bench --layouts NCHW,NHWC,NCHW8c,NCHW16c --with-conversions
  layoutkit conv bench --batch 8 --layouts NHWC,NCHW16c --threads 16 --json
  layoutkit conv bench --device cuda --filter 3x3          # tensor cores, f16, 3 layouts
  layoutkit conv bench --device cuda --layouts NC/32HW32 --types f16,i8,i8q
  layoutkit conv bench --layer C=32,HW=56,O=64,K=3 --layer C=96,HW=28,O=96,K=3,G=96 --batch 8")]
    Bench(ConvBenchArgs),
}

#[derive(Args, Debug)]
pub struct ConvBenchArgs {
    /// Batch size N.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Activation layouts to compare (comma-separated). CPU: NCHW, NHWC, NCHW8c, NCHW16c, ... (default
    /// NCHW,NHWC,NCHW8c); CUDA: NHWC, NCHW, NC/32HW32 (default all three).
    #[arg(long)]
    pub layouts: Option<String>,
    /// Input element types on CUDA (comma-separated): f16 and bf16 (f32 sums, output of the
    /// input's type), i8 (exact i32 sums and output; NHWC and NC/32HW32; C a multiple of 16 on
    /// Hopper GPUs (wgmma), of 64 elsewhere (mma.sync)) and i8q (i8 requantised to an i8
    /// output with a per-channel scale in the epilogue).
    #[arg(long, default_value = "f16")]
    pub types: String,
    /// Only the layers whose name contains this (e.g. 3x3).
    #[arg(long)]
    pub filter: Option<String>,
    /// Timed repetitions after one warm-up.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Where to run: cpu (the fast engine, f32, every layout in --layouts) or cuda (the
    /// tensor-core kernels reading the activations in each of --layouts, OHWI filter: wgmma
    /// on Hopper GPUs (f16/bf16 any C without groups, int8 C a multiple of 16), else mma.sync
    /// where C is a multiple of 32 (int8: 64); f16 depthwise layers in the depthwise kernel,
    /// other grouped ones in NHWC on Hopper GPUs as super-groups on wgmma (f16 from 50 M
    /// multiply-adds where a super-group is 64 channels or one group and C a multiple of it,
    /// bf16 wherever the super-groups apply), else in the grouped kernel (f16, mma.sync per
    /// group), else the direct kernel; the last column names the kernel).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// Print the layer list (after --filter) and time nothing; with --json, one object per
    /// layer (name, c, hw, o, k, stride, padding).
    #[arg(long)]
    pub list: bool,
    /// Which network's layers: resnet50, vgg16, mobilenetv2, all (the three) or resnext50
    /// (ResNeXt-50 32x4d: grouped 3x3 layers).
    #[arg(long, default_value = "resnet50")]
    pub net: String,
    /// A layer of your own in place of --net's (repeat for several):
    /// `C=..,HW=..,O=..,K=..[,S=..][,P=..][,G=..]`, input channels, input height and width,
    /// output channels, filter size, stride (1), padding (K / 2), groups (1), e.g.
    /// `--layer C=32,HW=56,O=64,K=3`.
    #[arg(long)]
    pub layer: Vec<String>,
    /// CPU engine: blocked (the register-blocked kernels) or fast (the implicit-GEMM path).
    #[arg(long, value_enum, default_value = "blocked")]
    pub engine: CpuConvEngine,
    /// CPU kernel build for --engine blocked: auto (the best this CPU has, or
    /// LAYOUTKIT_CPU_KERNELS), avx512, avx2 or portable.
    #[arg(long, value_enum, default_value = "auto")]
    pub kernels: KernelBuild,
    /// CPU: also time each layout with its conversions in and out (activations arriving and
    /// leaving in NCHW), the cost of keeping that layout for one layer only.
    #[arg(long)]
    pub with_conversions: bool,
    /// CUDA: time launches queued from the host (10 back to back per repetition) instead of a
    /// CUDA graph of 10 launches replayed (the default: GPU time only, as
    /// bench/torch_conv_bench.py times cuDNN). Shows the host's launch cost where a
    /// convolution takes less time on the GPU than its launch on the host.
    #[arg(long)]
    pub host_launches: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum CpuConvEngine {
    Blocked,
    Fast,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum KernelBuild {
    Auto,
    Avx512,
    Avx2,
    Portable,
}

#[derive(Args, Debug)]
pub struct ConvArgs {
    /// Activations .npy (axes N, C, H, W); `-` reads standard input.
    #[arg(required = true)]
    pub input: Option<PathBuf>,
    /// Filter .npy (axes O, I, H, W); `-` reads standard input.
    #[arg(required = true)]
    pub filter: Option<PathBuf>,
    /// Output .npy, or `-` for standard output (regular files are replaced atomically).
    #[arg(required = true)]
    pub output: Option<PathBuf>,
    /// Layout of the activations.
    #[arg(long, default_value = "NCHW")]
    pub input_format: String,
    /// Layout of the filter.
    #[arg(long, default_value = "OIHW")]
    pub filter_format: String,
    /// Layout of the output (default: the input's).
    #[arg(long)]
    pub output_format: Option<String>,
    /// Dims of the activations, needed when their layout is padded.
    #[arg(long)]
    pub input_dims: Option<String>,
    /// Dims of the filter, needed when its layout is padded.
    #[arg(long)]
    pub filter_dims: Option<String>,
    /// Stride: S or SH,SW.
    #[arg(long, value_parser = hw_pair, default_value = "1")]
    pub stride: [usize; 2],
    /// Zero padding on each side: P or PH,PW.
    #[arg(long, value_parser = hw_pair, default_value = "0")]
    pub padding: [usize; 2],
    /// Dilation: D or DH,DW.
    #[arg(long, value_parser = hw_pair, default_value = "1")]
    pub dilation: [usize; 2],
    /// Groups (C and O multiples of it; groups = C = O with I = 1 is depthwise).
    #[arg(long, default_value_t = 1)]
    pub groups: usize,
    /// Bias .npy: O values, added to each output channel.
    #[arg(long)]
    pub bias: Option<PathBuf>,
    /// Requantisation scale .npy: O values; each output channel's sum is multiplied by its
    /// value before the bias (int8 operands: `y = round(sum * scale + bias)`, saturated to
    /// --output-dtype, e.g. i8; the CPU's int8 engine, the reference and the CUDA int8
    /// kernels with an i8 output take it).
    #[arg(long)]
    pub scale: Option<PathBuf>,
    /// Apply max(0, x) after the bias.
    #[arg(long)]
    pub relu: bool,
    /// Element type of the output.
    #[arg(long)]
    pub output_dtype: Option<String>,
    /// blocked: register-blocked kernels on f32 NCHW / NHWC / NCHW8c-style activations (f32
    /// sums), and the int8 engine (exact i32 sums) for i8 activations and filters in any
    /// layouts; fast: implicit GEMM on f32; reference: exact f64 sums, any layouts and types;
    /// auto: blocked where it applies, else reference.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: ConvEngine,
    /// CPU threads for the fast engine (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Where to run: cpu (--engine), or cuda (the tensor-core kernels, reading NHWC, NCHW or
    /// NC/32HW32 activations in place and others converted to NHWC; f16 or bf16 with f32
    /// sums, or, for i8 activations and filter, int8 with exact i32 sums (without bias, or
    /// requantised in the kernel with --scale and --output-dtype i8); wgmma
    /// on Hopper GPUs (f16/bf16 without groups, int8 with C a multiple of 16), else mma.sync;
    /// groups, depthwise and other channel counts in f16 run a direct kernel; the filter goes
    /// over as OHWI, the output is converted to --output-format on the host).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ConvEngine {
    Auto,
    Blocked,
    Fast,
    Reference,
}

/// `2` or `2,1`: one value for both spatial axes, or H then W.
fn hw_pair(s: &str) -> Result<[usize; 2], String> {
    let parts: Vec<&str> = s.split(',').collect();
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("`{s}` is not a count or a pair H,W of counts"))
    };
    match parts.as_slice() {
        [v] => {
            let v = num(v)?;
            Ok([v, v])
        }
        [h, w] => Ok([num(h)?, num(w)?]),
        _ => Err(format!("`{s}` is not a count or a pair H,W of counts")),
    }
}

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod conv;
pub use conv::*;

const ABOUT: &str = "Where every element of a tensor lives, and how to move it between layouts.";

const LONG_ABOUT: &str = "\
Where every element of a tensor lives, and how to move it between layouts.

layoutkit understands NCHW, NHWC, blocked and padded layouts (NCHW32c, OIHW16i16o, OIHW4i16o4i),
cuDNN (NC/32HW32, NCHW_VECT_C), TensorRT (kHWC8, kCHW32, ...), oneDNN tags (nChw16c, OIhw16i16o)
and PyTorch memory formats (channels_last). Run with no command for a one-screen tour.";

const EXAMPLES: &str = "\
Examples:
  layoutkit                                   # the tour: one tensor in several layouts
  layoutkit formats                           # every accepted name and its canonical form
  layoutkit describe kHWC8 --dims N=16,C=3,H=224,W=224 --dtype f16
  layoutkit locate NC/32HW32 --dims N=2,C=40,H=7,W=7 --coord N=1,C=35,H=2,W=3
  layoutkit locate NC/32HW32 --dims N=2,C=40,H=7,W=7 --offset 4000
  layoutkit convert x.npy y.npy --from NCHW --to kHWC8
  layoutkit convert y.npy x2.npy --from kHWC8 --to NCHW --dims N=16,C=3,H=224,W=224
  layoutkit convert w.npy w8.npy --from OIHW --to OIHW4i16o4i --to-dtype f16
  layoutkit conv x.npy w.npy y.npy --input-format NHWC --padding 1 --relu
  layoutkit pack model.onnx -o model.mace.safetensors --target mace-gpu --dtype f16
  layoutkit unpack model.mace.safetensors -o restored.safetensors";

#[derive(Parser, Debug)]
#[command(name = "layoutkit", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXAMPLES)]
pub struct Cli {
    /// Print one JSON document on stdout and nothing else there.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List every accepted format name, its canonical form and what it means.
    Formats,
    /// Physical shape, strides, element count and bytes of a layout with given dims.
    #[command(after_help = "\
Examples:
  layoutkit describe kHWC8 --dims N=16,C=3,H=224,W=224 --dtype f16
  layoutkit describe OIHW4i16o4i --dims O=64,I=30,H=3,W=3 --json
  layoutkit describe mace:in_out_channel --dims N=2,H=5,W=3,C=6 --pixels

The physical shape is the shape of the row-major array the layout stores (padding included);
strides are in elements. `elements` counts padding; `logical_elements` does not.")]
    Describe(DescribeArgs),
    /// Map a logical coordinate to its physical offset, or an offset back to its coordinate.
    #[command(after_help = "\
Examples:
  layoutkit locate NCHW8c --dims N=1,C=10,H=4,W=4 --coord N=0,C=9,H=1,W=2
  layoutkit locate NCHW8c --dims N=1,C=10,H=4,W=4 --offset 150     # may be padding
  layoutkit locate mace:conv2d_filter --dims O=6,I=3,H=2,W=2 --pixel 1,4,1")]
    Locate(LocateArgs),
    /// Convert a .npy array from one layout to another (padding written with the fill value).
    #[command(after_help = "\
IN.npy holds the physical array of --from (C order); OUT.npy gets the physical array of --to.
--dims may be left out when IN has no padding: the dims then follow from its shape.
Image layouts (mace:*) are read and written as [height, width, 4] arrays and need --dims.
mace:winograd_filter:2|4 applies the Winograd transform U = G g G^T to a 3x3 filter (and
inverts it, to rounding, on the way back).

Casts (--to-dtype): f32 <-> f16/bf16 round to nearest even; float -> i8/u8/i32 computes
round_half_even(x / scale) + zero_point and saturates; integer -> float computes
(q - zero_point) * scale. bf16 is stored in .npy files as <u2 bit patterns.

Examples:
  layoutkit convert x.npy y.npy --from NCHW --to NC/32HW32
  layoutkit convert y.npy x.npy --from NC/32HW32 --to NCHW --dims N=8,C=3,H=32,W=32
  layoutkit convert x.npy q.npy --from NCHW --to NCHW32c --to-dtype i8 --scale 0.05 --zero-point 0
  layoutkit convert x.npy img.npy --from NHWC --to mace:in_out_channel --to-dtype f16
  layoutkit convert w.npy wino.npy --from OIHW --to mace:winograd_filter:2")]
    Convert(ConvertArgs),
    /// AutoTVM itervar features of a loop nest written in the IR text form.
    #[command(after_help = "\
The IR text form is TVM's old printer style (see the README): `for (x, 0, 128) { ... }`,
`parallel`/`unrolled`/`vectorized` loops, `// attr [iter_var(threadIdx.x, ...)] thread_extent = 8`,
stores `C[((x*128) + y)] = ...`, `let`, `if`, `allocate`, `evaluate(...)`, `#` comments.

Output: one block per itervar (outermost first) as TVM's get_itervar_feature prints it: `_attr_`
(length, nest level, top-down, bottom-up, 11-entry annotation one-hot), `_arith_` (float add,
mul, div counts) and one touch pattern (stride, mod, count, reuse, T_count, T_reuse) per access.

Examples:
  layoutkit features gemm.ir
  layoutkit features gemm.ir --take-log --flatten --json
  layoutkit features gemm.ir --flatten --names
  layoutkit features gemm.ir --curve --sample-n 20
  layoutkit features conv.ir --dtype data=float16 --dtype kernel=float16")]
    Features(FeaturesArgs),
    /// Time conversions: GB/s (bytes read + written over the median time) and the ratio to a
    /// plain copy of the same bytes timed in the same run.
    #[command(after_help = "\
With no --from/--to it runs the standard set (NCHW<->NHWC, NCHW->NCHW32c, NCHW->kHWC8,
OIHW->OIHW16i16o, NHWC->mace:in_out_channel; f32 and f16; tensors of 64 MiB and more) and prints a
table. The CPU engine is the fast engine (tiles, SIMD chosen at run time, --threads); on the
CPU the conversion and the copy are timed alternately, so both see the same machine state, and
with several threads the copy counts at its best of the calling thread alone and all threads.

--sweep (CPU, or CUDA with --device cuda) runs a fixed grid of shape classes instead: every conversion of the standard set and
its inverse, and NHWC<->mace:in_out_channel/height/width, OIHW<->mace:conv2d_filter; channels
1,3,4,16,24,250,256,1000,2048 x spatial 1x1,7x7,14x14,56x56,64x64,224x224,1024x1024 (filters: I =
channels, O in the batch's role, 1x1/3x3/7x7); per class a batch giving a 64 KiB..1 MiB tensor and
one of about 32 MiB (--sweep-size full: every channel/spatial pair, and 1 GiB tensors up to
--sweep-max-mib); f32 and f16 everywhere, i8 and the f32->f16 and f32->i8 casts on NCHW<->NHWC and
NCHW<->NCHW32c. Each row prints its ratio to the copy; the end gives, per size class (<1 MiB,
1-8 MiB, >=8 MiB), the median ratio and the five worst rows, and the per-call overhead (CUDA: an
empty kernel's launch time, and how many rows of 1 MiB or less are within 1.5x of it).
bench/torch_sweep.py times PyTorch on the same rows from the --json output.

Examples:
  layoutkit bench
  layoutkit bench --sweep --threads 2 --json > sweep.json
  layoutkit bench --sweep --sweep-filter \"NCHW->NHWC f16\" --list
  layoutkit bench --sweep --device cuda --sweep-filter \"NCHW->kHWC8\" --json
  layoutkit bench --from NCHW --to NHWC --dims N=16,C=256,H=56,W=56 --dtype f16 --json
  layoutkit bench --device opencl --from NHWC --to mace:in_out_channel --dims N=8,H=224,W=224,C=32")]
    Bench(BenchArgs),
    /// Run one 2-D convolution on .npy operands in any layouts, on the CPU or a CUDA GPU.
    #[command(after_help = "\
X.npy holds the activations (axes N, C, H, W) as the physical array of --input-format, W.npy the
filter (axes O, I, H, W with I = C / groups) as the physical array of --filter-format. Y.npy gets
the output (N, C = O, H, W) as the physical array of --output-format, padding filled with 0.
Dims follow from the arrays' shapes; pass --input-dims/--filter-dims for padded layouts.
--engine blocked (the default for f32 NCHW, NHWC and NCHW<x>c activations) runs the
register-blocked kernels (AVX-512, AVX2 or portable, chosen at run time; grouped convolutions
without whole vectors of output channels per group, depthwise among them, go to the fast
engine); --engine fast is the implicit GEMM; both sum in f32 on all cores; --engine reference sums exactly in f64 and rounds once to
--output-dtype (default: the input's float type, or i32 for i8/u8 inputs, whose sums are then
exact), for any layouts and types.

Examples:
  layoutkit conv x.npy w.npy y.npy --input-format NHWC --padding 1
  layoutkit conv x.npy w.npy y.npy --input-format NCHW8c --input-dims N=1,C=3,H=32,W=32 \\
      --filter-format OIHW --output-format NHWC --stride 2 --padding 1 --bias b.npy --relu
  layoutkit conv x.npy w.npy y.npy --groups 32 --padding 1      # depthwise: W is O=32,I=1
  layoutkit conv x.npy w.npy y.npy --input-format NHWC --padding 1 --device cuda
  layoutkit conv x8.npy w8.npy y8.npy --scale s.npy --bias b.npy --output-dtype i8 \\
      --input-format NHWC --padding 1 --device cuda    # int8, requantised in the kernel
  layoutkit conv bench --batch 1 --layouts NCHW,NHWC,NCHW8c      # TFLOP/s per layer and layout")]
    Conv(Box<ConvCommand>),
    /// Pack a model's weights (ONNX, safetensors, sharded checkpoint) into the layouts an
    /// engine wants, as a safetensors file with layout metadata.
    #[command(after_help = PACK_HELP)]
    Pack(PackArgs),
    /// Restore the source tensors of a file (or checkpoint) that `pack` wrote.
    #[command(after_help = UNPACK_HELP)]
    Unpack(UnpackArgs),
    /// The built-in example (what `layoutkit` with no command runs).
    Tour,
}

const PACK_HELP: &str = "\
MODEL is an ONNX file, a .safetensors file, or a sharded checkpoint's *.safetensors.index.json
(its shards next to it). OUT is a .safetensors file, or a folder for a sharded checkpoint (one
output shard per input shard, same names, and a new index).

Each weight gets a role, which says how its stored array is read:
  conv        [O, I, KH, KW] convolution filter (ONNX Conv, group 1)
  depthwise   [C*M, 1, KH, KW] (Conv with group = input channels; depthwise:M for multiplier M)
  grouped:G   [O, I/G, KH, KW] grouped convolution filter
  deconv      [I, O/G, KH, KW] ConvTranspose filter (deconv:G)
  dense       [O, I] dense weight (Gemm transB=1, PyTorch Linear); dense-io is [I, O] (MatMul)
  bias        [L] (Conv/Gemm bias, Gemm C, MatMul+Add);  vector: BatchNorm/PRelu parameters
  keep        anything else: stored unchanged (floats cast to --dtype)
From an ONNX graph the roles come from the nodes that consume each weight (all must agree).
Without a graph: [O, I>1, KH, KW] is conv, 2-D is dense (names with `embed` are kept), 1-D is
bias (name ends in `bias`) or vector; [O, 1, KH, KW] is ambiguous and needs a rule.

Profiles (--target) and what each role becomes:
  mace-gpu       conv mace:conv2d_filter (mace:winograd_filter:B with --winograd B for 3x3,
                 stride 1, dilation 1 convolutions), depthwise mace:dw_conv2d_filter, deconv
                 mace:conv2d_filter, dense mace:weight_width, bias/vector mace:argument
                 (MACE's OpenCL images, arrays [height, width, 4]; MACE stores f16: --dtype f16)
  onednn-avx2    conv/deconv OIhw8i8o, grouped gOIhw8i8o, depthwise Goihw8g, dense OI8i8o
  onednn-avx512  conv/deconv OIhw16i16o, grouped gOIhw16i16o, depthwise Goihw16g, dense OI16i16o
  cudnn-nhwc     conv/depthwise/grouped OHWI (KRSC), deconv IHWO, dense OI
  tensorrt-int8  conv/grouped OIHW32i, depthwise OIHW, deconv IOHW, dense OI; int8 with one
                 symmetric scale per output channel (max|w|/127, stored as NAME:scale); biases f32
  layoutkit-cuda conv/depthwise/grouped OHWI (layoutkit conv --device cuda), dense OI
Roles a profile has no layout for keep their source layout.

--rule NAME_GLOB=TARGET (repeatable, first match wins; * and ? match any characters): TARGET is a
role (`depthwise`), a layout (`OIhw8i8o`, `mace:conv2d_filter`) or both (`dense@OI16i16o`).

Output: every tensor as its physical array; the `layoutkit` metadata key holds, per tensor, the
layout, canonical form, logical dims, element type, scale/zero point and source name, layout,
dims, shape and type. Written atomically (a temporary file renamed into place).

Examples:
  layoutkit pack resnet.onnx -o resnet.avx512.safetensors --target onednn-avx512
  layoutkit pack mobilenet.onnx -o mn.mace.safetensors --target mace-gpu --dtype f16 --winograd 2
  layoutkit pack model.safetensors -o q.safetensors --target tensorrt-int8 --rule '*.dw.weight=depthwise'
  layoutkit pack ckpt/model.safetensors.index.json -o packed/ --target cudnn-nhwc --dtype f16
  layoutkit pack model.onnx --target mace-gpu --dry-run          # the table, nothing written";

const UNPACK_HELP: &str = "\
PACKED is a file `layoutkit pack` wrote, or the folder (or index) of a packed sharded checkpoint.
OUT gets the source tensors (names, shapes, element types, layouts) as safetensors: bit for bit
where the pack did no cast, quantisation or Winograd transform; otherwise within their rounding
(f16 widens back exactly, int8 returns q * scale, Winograd inverts to float rounding).

Examples:
  layoutkit unpack resnet.avx512.safetensors -o resnet.restored.safetensors
  layoutkit unpack packed/ -o restored/";

#[derive(Args, Debug)]
pub struct PackArgs {
    /// The model: .onnx, .safetensors, or a sharded checkpoint's *.index.json.
    pub model: PathBuf,
    /// Output .safetensors file (a folder for a sharded checkpoint).
    #[arg(short, long, required_unless_present = "dry_run")]
    pub output: Option<PathBuf>,
    /// Profile: mace-gpu, onednn-avx2, onednn-avx512, cudnn-nhwc, tensorrt-int8, layoutkit-cuda.
    #[arg(long)]
    pub target: String,
    /// Element type of packed weights: f32, f16, bf16 (every float tensor), or i8 (filters and
    /// dense weights, per-output-channel symmetric). Default: the source's (i8 for tensorrt-int8).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Winograd block (2 or 4) for 3x3 stride-1 convolutions (mace-gpu; needs an ONNX graph).
    #[arg(long)]
    pub winograd: Option<u8>,
    /// NAME_GLOB=ROLE, NAME_GLOB=LAYOUT or NAME_GLOB=ROLE@LAYOUT (repeatable; first match wins).
    #[arg(long = "rule", value_name = "NAME_GLOB=TARGET")]
    pub rules: Vec<String>,
    /// Print the table of tensors (role, source and target layout, dims, bytes); write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// fast (default) or reference (the per-element oracle; slow, for checking).
    #[arg(long, value_enum, default_value = "fast")]
    pub engine: PackEngine,
    /// Do not wait for the disk before renaming outputs into place (still atomic on a crash of
    /// layoutkit, not on a power loss).
    #[arg(long)]
    pub no_sync: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum PackEngine {
    Fast,
    Reference,
}

#[derive(Args, Debug)]
pub struct UnpackArgs {
    /// A packed .safetensors file, or a packed checkpoint's folder or index.
    pub packed: PathBuf,
    /// Output .safetensors file (a folder for a sharded checkpoint).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Do not wait for the disk before renaming outputs into place.
    #[arg(long)]
    pub no_sync: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Source layout (with --to and --dims; leave all three out for the standard set).
    #[arg(long, requires_all = ["to", "dims"])]
    pub from: Option<String>,
    /// Destination layout.
    #[arg(long, requires = "from")]
    pub to: Option<String>,
    /// Logical extents.
    #[arg(long, requires = "from")]
    pub dims: Option<String>,
    /// Element type of the source.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Element type of the destination (default: the source's).
    #[arg(long)]
    pub to_dtype: Option<String>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// Timed repetitions (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 10)]
    pub repeats: usize,
    /// CPU threads for the conversion and for the copy it is compared with.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Start the source this many bytes past a 64-byte boundary (CPU; default 0). Buffers
    /// from malloc and numpy are often 16 bytes past one.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..64))]
    pub src_offset: u8,
    /// Run the sweep (CPU or CUDA): every conversion of the standard set and its inverse and the MACE
    /// image types, over channels 1,3,4,16,24,250,256,1000,2048 and spatial 1x1..1024x1024
    /// (filters: 1x1, 3x3, 7x7), a small (64 KiB..1 MiB) and a 32 MiB tensor per class (and
    /// 1 GiB with --sweep-size full), f32, f16, i8 and the f32->f16 / f32->i8 casts; ends
    /// with the median and the five worst ratios to the copy per size class.
    #[arg(long, conflicts_with_all = ["from", "to", "dims"])]
    pub sweep: bool,
    /// small: 3 spatial extents per channel count (the pairs models use); full: every pair
    /// and 1 GiB tensors.
    #[arg(long, value_enum, default_value = "small", requires = "sweep")]
    pub sweep_size: SweepSize,
    /// Only the sweep rows whose label (`FROM->TO TYPE DIMS`, e.g. `NCHW->NHWC f16
    /// N=1,C=3,H=1024,W=1024`) contains every whitespace-separated word of this.
    #[arg(long, requires = "sweep")]
    pub sweep_filter: Option<String>,
    /// The largest sweep tensor, MiB (its source; 1024 by default).
    #[arg(long, default_value_t = 1024, requires = "sweep")]
    pub sweep_max_mib: usize,
    /// Print the sweep's rows and time nothing.
    #[arg(long, requires = "sweep")]
    pub list: bool,
}

/// How much of the grid `bench --sweep` runs.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SweepSize {
    Small,
    Full,
}

#[derive(Args, Debug)]
pub struct FeaturesArgs {
    /// IR file (text form); `-` reads standard input.
    pub file: PathBuf,
    /// Apply TVM's take_log transform (log2(x+1), sign-symmetric) to every value but nest level
    /// and the one-hot.
    #[arg(long)]
    pub take_log: bool,
    /// Print the flat float32 vector (TVM's get_itervar_feature_flatten).
    #[arg(long)]
    pub flatten: bool,
    /// Print the name of every flat value (TVM's get_flatten_name).
    #[arg(long)]
    pub names: bool,
    /// Print the curve-sample feature (TVM's get_buffer_curve_sample_flatten).
    #[arg(long)]
    pub curve: bool,
    /// Samples per curve for --curve.
    #[arg(long, default_value_t = 30, requires = "curve")]
    pub sample_n: usize,
    /// Element type of a buffer, e.g. A=float16 (default float32). Repeatable.
    #[arg(long = "dtype", value_name = "NAME=T")]
    pub dtypes: Vec<String>,
}

#[derive(Args, Debug)]
pub struct DescribeArgs {
    /// Format name (canonical, cuDNN, TensorRT, oneDNN or PyTorch; see `layoutkit formats`).
    pub format: String,
    /// Logical extents, e.g. N=16,C=3,H=224,W=224 (every axis of the format).
    #[arg(long)]
    pub dims: String,
    /// Element type for the byte count: f32 f16 bf16 f64 i8 u8 i32.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// For an image layout: print every pixel with the elements its lanes hold.
    #[arg(long)]
    pub pixels: bool,
}

#[derive(Args, Debug)]
pub struct LocateArgs {
    /// Format name.
    pub format: String,
    /// Logical extents, e.g. N=2,C=40,H=7,W=7.
    #[arg(long)]
    pub dims: String,
    /// A logical coordinate, e.g. N=1,C=35,H=2,W=3.
    #[arg(long, conflicts_with = "offset", required_unless_present_any = ["offset", "pixel"])]
    pub coord: Option<String>,
    /// A physical offset in elements.
    #[arg(long)]
    pub offset: Option<usize>,
    /// For an image layout: a pixel and lane, X,Y,LANE (e.g. 3,0,1).
    #[arg(long, conflicts_with_all = ["coord", "offset"])]
    pub pixel: Option<String>,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Input .npy file (`-` reads standard input): the physical array of --from.
    pub input: PathBuf,
    /// Output .npy file, or `-` for standard output (regular files are replaced atomically;
    /// see the README's "Files" section).
    pub output: PathBuf,
    /// Layout of the input.
    #[arg(long)]
    pub from: String,
    /// Layout to write.
    #[arg(long)]
    pub to: String,
    /// Logical extents; needed when the input is padded.
    #[arg(long)]
    pub dims: Option<String>,
    /// Element type to write (default: the input's).
    #[arg(long)]
    pub to_dtype: Option<String>,
    /// Quantisation scale for float <-> integer casts.
    #[arg(long)]
    pub scale: Option<f32>,
    /// Quantisation zero point for float <-> integer casts.
    #[arg(long, allow_hyphen_values = true)]
    pub zero_point: Option<i32>,
    /// Value written into the output's padding (default 0).
    #[arg(long, allow_hyphen_values = true)]
    pub fill: Option<f64>,
    /// Where to convert: cpu, or opencl (the device named by LAYOUTKIT_OPENCL_DEVICE, else the
    /// first GPU, else the first OpenCL device).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// CPU engine: fast (tiled, SIMD, threads), planned (single-threaded runs), or the
    /// per-element reference (the oracle).
    #[arg(long, value_enum, default_value = "fast")]
    pub engine: Engine,
    /// CPU threads for the fast engine (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda,
    Opencl,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Engine {
    Fast,
    Planned,
    Reference,
}

//! Grouped convolutions on the Hopper kernel ([`super::hopper_source`]): groups joined into
//! *super-groups* of at least one K step's channels (64 f16 or bf16), each super-group a
//! dense convolution whose filter is block-diagonal (zeros between its groups).
//!
//! * A super-group holds `Cs = lcm(Cg, 64)` input channels: 64 where a group's channels divide
//!   64 (64 / Cg groups together), one group where they are a multiple of 64, else the fewest
//!   groups that fill whole 64-channel steps (RegNet's groups of 24 or 48: 192 channels). Its
//!   output channels are its groups' (`Os = Cs / Cg * O / G`), so an output tile of `bn`
//!   channels (`bn` dividing `Os`) lies in one super-group, and its block walks K over the
//!   filter's taps and that super-group's `Cs` channels only (`kh * kw * Cs / 64` steps),
//!   reading the NHWC activations at channel `(n0 / Os) * Cs` with the full pixel stride.
//! * The filter the kernel reads is `O x kh x kw x Cs` (OHWI over the super-group's channels):
//!   where a super-group joins several groups a pass ([`expand_source`]) writes it from the
//!   grouped OHWI filter into scratch memory before each run (zeros outside each output
//!   channel's group); where it is one group (Cg a multiple of 64) it is the grouped filter
//!   itself.
//! * Products with the zeros are wasted: `Cs / Cg` times the useful work (16x for ResNeXt's
//!   groups of 4, 2x for its groups of 32, 8x and 4x for RegNet's 24 and 48; at most
//!   [`MAX_JOINED_GROUPS`]), on tensor cores that run 10-20x faster than the
//!   per-group `mma.sync` kernel ([`super::grouped_source`]) on the gathers it spends its time on.

use std::fmt::Write;

use layoutkit_core::DType;

use super::{ConvKernel, ConvLayout, HopperTile};

/// Channels of one K step of the Hopper kernel's 2-byte inputs (128 bytes).
const STEP_CHANNELS: usize = 64;

/// Threads per block of the filter pass.
pub const EXPAND_THREADS: u32 = 256;

/// Input channels of `k`'s super-groups (see the module): the fewest whole groups that fill
/// whole K steps, `lcm(Cg, 64)` (64 where a group's channels divide 64, the group's where
/// they are a multiple of 64, 192 for groups of 24 or 48).
pub fn supergroup_channels(k: &ConvKernel) -> usize {
    let cg = (k.shape.c / k.shape.conv.groups.max(1)).max(1);
    cg / gcd(cg, STEP_CHANNELS) * STEP_CHANNELS
}

/// The most groups a super-group joins: 16, ResNeXt's groups of 4 (more would multiply by
/// zeros more than 16 times the useful work).
pub const MAX_JOINED_GROUPS: usize = 16;

/// The greatest common divisor of `a` and `b`.
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Output channels of `k`'s super-groups.
pub fn supergroup_outputs(k: &ConvKernel) -> usize {
    let s = &k.shape;
    let g = s.conv.groups.max(1);
    supergroup_channels(k) / (s.c / g).max(1) * (s.o / g)
}

/// Why the Hopper kernel does not take grouped `k` as super-groups, or None where it does:
/// f16 or bf16 NHWC activations of more than one group (C a multiple of 8), not depthwise,
/// super-groups ([`supergroup_channels`]) of at most [`MAX_JOINED_GROUPS`] groups with a
/// multiple of 32 output channels (the last super-group may hold fewer groups: its channels
/// past C are read as zeros), and
/// what the Hopper kernel takes of the same problem without groups (types, output layout,
/// tensor sizes).
pub fn grouped_wgmma_unsupported_reason(k: &ConvKernel) -> Option<String> {
    let s = &k.shape;
    let g = s.conv.groups;
    if g <= 1 || !s.c.is_multiple_of(g) || !s.o.is_multiple_of(g) {
        return Some(
            "super-groups are for grouped convolutions (C and O multiples of the groups)".into(),
        );
    }
    if !matches!(k.input, DType::F16 | DType::BF16) {
        return Some(format!("super-groups take f16 or bf16, not {}", k.input));
    }
    if k.layout != ConvLayout::Nhwc {
        return Some("super-groups read NHWC activations".into());
    }
    let cg = s.c / g;
    if cg == 0 {
        return Some("super-groups need channels in every group (C = 0)".into());
    }
    if cg == 1 {
        return Some("depthwise layers run in their own kernel".into());
    }
    let cs = supergroup_channels(k);
    if cs / cg > MAX_JOINED_GROUPS {
        return Some(format!(
            "super-groups of groups of {cg} channels would join {} groups (at most {MAX_JOINED_GROUPS})",
            cs / cg
        ));
    }
    if !s.c.is_multiple_of(8) {
        return Some(format!(
            "super-groups read 16-byte runs of channels: C must be a multiple of 8 (C = {})",
            s.c
        ));
    }
    if !supergroup_outputs(k).is_multiple_of(32) {
        return Some(format!(
            "super-groups need a multiple of 32 output channels each ({})",
            supergroup_outputs(k)
        ));
    }
    let dense = dense_view(k);
    super::hopper_unsupported_reason(&dense)
}

/// `k` without groups, for the checks the dense Hopper kernel makes of types and layouts.
fn dense_view(k: &ConvKernel) -> ConvKernel {
    let mut dense = *k;
    dense.shape.conv.groups = 1;
    dense
}

/// The problem whose filter the super-group kernel reads, for its tensor map: `k` without
/// groups over a super-group's channels (`O x kh x kw x Cs`).
pub fn filter_view(k: &ConvKernel) -> ConvKernel {
    let mut view = dense_view(k);
    view.shape.c = supergroup_channels(k);
    view
}

/// Whether `k`'s filter goes through [`expand_source`]'s pass (super-groups of more than one
/// group).
pub fn needs_expansion(k: &ConvKernel) -> bool {
    supergroup_channels(k) != k.shape.c / k.shape.conv.groups.max(1)
}

/// Why `tile` cannot run `k` as super-groups, or None where it can: its `group_channels` are
/// `k`'s super-groups' channels and its columns divide a super-group's outputs (so a block's
/// outputs lie in one super-group).
pub fn grouped_tile_reason(k: &ConvKernel, tile: &HopperTile) -> Option<String> {
    let (cs, os) = (supergroup_channels(k), supergroup_outputs(k));
    if tile.group_channels != cs || tile.nchw || tile.splits > 1 || tile.persistent {
        return Some(format!(
            "the super-group kernel needs an NHWC tile of {cs} channels per group, one split, \
             not persistent"
        ));
    }
    if tile.tma {
        // The activations' im2col boxes are a tap's row of the problem's channels
        // (`tma::row_bytes`): 128 bytes, whole 64-channel steps, where C is a multiple of 64.
        if tile.k_bytes != 128 || super::tma::row_bytes(&dense_view(k)) != 128 {
            return Some(
                "super-groups load 128-byte rows by TMA (C a multiple of 64); cp.async otherwise"
                    .into(),
            );
        }
        if let Some(why) = super::tma_unsupported_reason(&dense_view(k)) {
            return Some(why);
        }
    }
    (!os.is_multiple_of(tile.bn)).then(|| {
        format!(
            "a tile of {} columns does not divide a super-group's {os} output channels",
            tile.bn
        )
    })
}

/// Whether `k` runs as super-groups on a Hopper GPU where the kernel takes it: super-groups
/// of the shapes measured faster than the per-group kernel (64 channels, or one group, C a
/// multiple of them; wider joins ran slower) from [`MIN_SUPERGROUP_MACS`], or any the kernel takes where no other kernel takes the problem
/// (bf16: the per-group and direct kernels take f16 only).
pub fn grouped_wgmma_preferred(k: &ConvKernel) -> bool {
    let only_way = !super::grouped_applies(k) && super::direct_unsupported_reason(k).is_some();
    grouped_wgmma_unsupported_reason(k).is_none()
        && ((measured_shape(k) && k.macs() >= MIN_SUPERGROUP_MACS) || only_way)
}

/// Super-groups of the shapes measured faster than the per-group kernel: 64 channels
/// (groups of a divisor of 64) or one group (a multiple of 64), C a multiple of them. Wider
/// joins ran slower: RegNetX-600MF's groups of 24 (super-groups of 192 channels, 8 groups, the
/// last partly past C) at 0.35-0.69x the per-group kernel at batch 1-64 on an H200
/// (`bench/results/conv.md`).
fn measured_shape(k: &ConvKernel) -> bool {
    let cs = supergroup_channels(k);
    let cg = k.shape.c / k.shape.conv.groups.max(1);
    (cs == STEP_CHANNELS || cs == cg) && k.shape.c.is_multiple_of(cs)
}

/// The fewest (useful) multiply-adds for which [`grouped_wgmma_preferred`] takes a problem;
/// smaller ones run in the per-group `mma.sync` kernel where it takes them. Measured on an
/// H200 (`bench/results/conv.md`, `conv bench`, NHWC, best of two alternated passes):
/// ResNeXt-50 32x4d's seven grouped 3x3 layers (about 14.5 M multiply-adds per image) at
/// batch 1 ran 4.3-5.0 TFLOP/s as super-groups against 4.7-8.1 in the per-group kernel
/// (super-groups faster only on `3x3 128->128 @56`), at batch 8 (116 M) 15.0-33.7 against
/// 6.3-29.2, at batch 32 and 64 1.5-2.9x.
pub const MIN_SUPERGROUP_MACS: usize = 50_000_000;

/// The tile of the super-group kernel for `k`: loaded by TMA (by `cp.async` with
/// `LAYOUTKIT_CONV_TMA=0` or where the TMA kernel does not take the problem), no split of K,
/// 64 columns where a super-group has that many outputs (else 32); 128 rows and three stages
/// where that makes at least one block per SM, else 64 rows and four stages. Measured on an
/// H200 (`bench/results/conv.md`, ResNeXt-50's grouped layers at batch 8, 32 and 64, best of
/// two alternated passes): TMA 1.01-1.20x `cp.async` with the same tile; 128 x 64 x 3 against
/// 128 x 64 x 4 0.98-1.18x at batch 32 and 64 (geometric mean 1.04); at batch 32 `3x3
/// 1024->1024 @7` (208 tiles of 128 rows) 87.7 TFLOP/s against 72.9 with 64 rows.
pub fn grouped_wgmma_tile(k: &ConvKernel) -> HopperTile {
    let os = supergroup_outputs(k);
    let bn = if os.is_multiple_of(64) { 64 } else { 32 };
    let s = &k.shape;
    let pixels = s.n * s.oh * s.ow;
    let blocks_128 = pixels.div_ceil(128) * s.o.div_ceil(bn);
    let (bm, stages) = if blocks_128 >= super::SMS {
        (128, 3)
    } else {
        (64, 4)
    };
    let tile = HopperTile::new(bm, bn, stages)
        .and_then(|t| t.with_group_channels(supergroup_channels(k)))
        .expect("a tile the Hopper kernel has");
    let tma = std::env::var("LAYOUTKIT_CONV_TMA").as_deref() != Ok("0");
    tile.with_tma(tma)
        .filter(|t| grouped_tile_reason(k, t).is_none())
        .unwrap_or(tile)
}

/// The statement (in the `cp.async` loader taking K step `t`) that sets the step's filter tap
/// `r`, `sx`, its channel `cw` within the super-group and `c0`, the activations' channel.
pub(super) fn supergroup_tap(k: &ConvKernel) -> String {
    let chunks = supergroup_channels(k) / STEP_CHANNELS;
    format!(
        "    const int rs = t / {chunks}, cw = (t % {chunks}) * {STEP_CHANNELS}, c0 = (n0 / {os}) * {cs} + cw, r = rs / {kw}, sx = rs % {kw};",
        os = supergroup_outputs(k),
        cs = supergroup_channels(k),
        kw = k.shape.kw
    )
}

/// The `cp.async` copies of a thread's `ar` activation chunks of one K step (after
/// [`supergroup_tap`]) to `dst`, as [`super::source::a_loads`], zero-filled also past C (the
/// last super-group's channels where C is not a multiple of its width).
pub(super) fn supergroup_a_loads(
    k: &mut String,
    kernel: &ConvKernel,
    ar: usize,
    step: usize,
    dst: &str,
) {
    let s = &kernel.shape;
    let dst = dst.replace("{step}", &step.to_string());
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {ar}; ++i) {{\n      {}\n      const unsigned short* ga = ok ? x + ((pn[i] * {h} + ih) * {w} + iw) * {c} + c0 + lcol : x;\n      cp16({dst}, ga, ok ? 16 : 0);\n    }}",
        super::source::tap_pixel(kernel, "r", "sx", &format!("c0 + lcol < {}", s.c)),
        h = s.h,
        w = s.w,
        c = s.c,
    );
}

/// The `cp.async` copies of a thread's `br` filter chunks of one K step (after
/// [`supergroup_tap`]) from the `O x kh x kw x Cs` filter to `dst`, as
/// [`super::source::b_loads`].
pub(super) fn supergroup_b_loads(
    k: &mut String,
    kernel: &ConvKernel,
    br: usize,
    step: usize,
    dst: &str,
) {
    let s = &kernel.shape;
    let dst = dst.replace("{step}", &step.to_string());
    let _ = writeln!(
        k,
        "    #pragma unroll\n    for (int i = 0; i < {br}; ++i) {{\n      const int oc = n0 + lrow + i * {step};\n      const unsigned short* gb = oc < {o} ? w + ((oc * {kh} + r) * {kw} + sx) * {cs} + cw + lcol : w;\n      cp16({dst}, gb, oc < {o} ? 16 : 0);\n    }}",
        o = s.o,
        kh = s.kh,
        kw = s.kw,
        cs = supergroup_channels(kernel),
    );
}

/// K steps of the super-group kernel for `k`: the taps times the super-group's chunks of 64
/// channels.
pub fn supergroup_steps(k: &ConvKernel) -> usize {
    k.shape.kh * k.shape.kw * supergroup_channels(k) / STEP_CHANNELS
}

/// Elements of the filter the super-group kernel reads (`O x kh x kw x Cs`).
pub fn expanded_filter_elements(k: &ConvKernel) -> usize {
    let s = &k.shape;
    s.o * s.kh * s.kw * supergroup_channels(k)
}

/// CUDA source of `conv_expand_groups(w, ws)`: from the grouped OHWI filter `w` (`O x kh x
/// kw x Cg`, 2-byte elements) the super-groups' filter `ws` (`O x kh x kw x Cs`): element
/// `j` of output channel `oc`'s tap is input channel `(oc / Os) * Cs + j`, the grouped
/// filter's value where that channel is in `oc`'s group, else zero. One thread per element of
/// `ws`, [`EXPAND_THREADS`] per block ([`expand_grid`] blocks).
pub fn expand_source(k: &ConvKernel) -> String {
    let s = &k.shape;
    let g = s.conv.groups;
    let (cg, og) = (s.c / g, s.o / g);
    let (cs, os) = (supergroup_channels(k), supergroup_outputs(k));
    let taps = s.kh * s.kw;
    format!(
        "// Generated by layoutkit-cuda (conv, super-groups' filter).\n\
extern \"C\" __global__ void conv_expand_groups(const unsigned short* __restrict__ w, unsigned short* __restrict__ ws) {{\n\
  const long long i = (long long)blockIdx.x * {EXPAND_THREADS} + threadIdx.x;\n\
  if (i >= {total}LL) return;\n\
  const int j = (int)(i % {cs});\n\
  const long long rest = i / {cs};\n\
  const int tap = (int)(rest % {taps}), oc = (int)(rest / {taps});\n\
  const int c = (oc / {os}) * {cs} + j - (oc / {og}) * {cg};\n\
  ws[i] = (c >= 0 && c < {cg}) ? w[((long long)oc * {taps} + tap) * {cg} + c] : (unsigned short)0;\n\
}}\n",
        total = expanded_filter_elements(k),
    )
}

/// Blocks of [`expand_source`]'s pass.
pub fn expand_grid(k: &ConvKernel) -> u32 {
    expanded_filter_elements(k).div_ceil(EXPAND_THREADS as usize) as u32
}

#[cfg(test)]
#[path = "grouped_wgmma_tests.rs"]
mod tests;

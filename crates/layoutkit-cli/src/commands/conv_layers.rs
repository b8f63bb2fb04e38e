//! The convolution layers `layoutkit conv bench` times: ResNet-50's, VGG-16's and
//! MobileNetV2's, ResNeXt-50's, or layers given on the command line ([`custom`]).

use std::borrow::Cow;

use anyhow::{bail, Context, Result};
use layoutkit_core::conv::Conv2d;
use layoutkit_core::Dims;

/// One convolution layer: name, input channels, input size, output channels, kernel, stride,
/// padding, groups (C for a depthwise layer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub name: Cow<'static, str>,
    pub c: usize,
    pub hw: usize,
    pub o: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    pub groups: usize,
}

impl Layer {
    /// The layer's parameters.
    pub fn conv(&self) -> Conv2d {
        Conv2d {
            stride: [self.stride; 2],
            padding: [self.pad; 2],
            groups: self.groups,
            ..Conv2d::default()
        }
    }

    /// Input and filter dims at batch `n`.
    pub fn dims(&self, n: usize) -> Result<(Dims, Dims)> {
        Ok((
            Dims::parse(&format!("N={n},C={},H={},W={}", self.c, self.hw, self.hw))?,
            Dims::parse(&format!(
                "O={},I={},H={},W={}",
                self.o,
                self.c / self.groups,
                self.k,
                self.k
            ))?,
        ))
    }
}

const fn layer(
    name: &'static str,
    c: usize,
    hw: usize,
    o: usize,
    k: usize,
    stride: usize,
    pad: usize,
) -> Layer {
    Layer {
        name: Cow::Borrowed(name),
        c,
        hw,
        o,
        k,
        stride,
        pad,
        groups: 1,
    }
}

/// A depthwise 3x3 layer (groups = C = O, padding 1).
const fn depthwise(name: &'static str, c: usize, hw: usize, stride: usize) -> Layer {
    grouped(name, c, hw, stride, c)
}

/// A grouped 3x3 layer of `c` channels in and out, `groups` groups, padding 1.
const fn grouped(name: &'static str, c: usize, hw: usize, stride: usize, groups: usize) -> Layer {
    Layer {
        name: Cow::Borrowed(name),
        c,
        hw,
        o: c,
        k: 3,
        stride,
        pad: 1,
        groups,
    }
}

/// The distinct convolutions of ResNet-50 v1.5 (stride on the 3x3 of each stage's first
/// block, as torchvision builds it) for a 224 x 224 input.
pub const RESNET50: &[Layer] = &[
    layer("conv1 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3),
    layer("l1 1x1 64->64 @56", 64, 56, 64, 1, 1, 0),
    layer("l1 3x3 64->64 @56", 64, 56, 64, 3, 1, 1),
    layer("l1 1x1 64->256 @56", 64, 56, 256, 1, 1, 0),
    layer("l1 1x1 256->64 @56", 256, 56, 64, 1, 1, 0),
    layer("l2 1x1 256->128 @56", 256, 56, 128, 1, 1, 0),
    layer("l2 3x3/2 128->128 @56", 128, 56, 128, 3, 2, 1),
    layer("l2 1x1/2 256->512 @56", 256, 56, 512, 1, 2, 0),
    layer("l2 1x1 128->512 @28", 128, 28, 512, 1, 1, 0),
    layer("l2 1x1 512->128 @28", 512, 28, 128, 1, 1, 0),
    layer("l2 3x3 128->128 @28", 128, 28, 128, 3, 1, 1),
    layer("l3 1x1 512->256 @28", 512, 28, 256, 1, 1, 0),
    layer("l3 3x3/2 256->256 @28", 256, 28, 256, 3, 2, 1),
    layer("l3 1x1/2 512->1024 @28", 512, 28, 1024, 1, 2, 0),
    layer("l3 1x1 256->1024 @14", 256, 14, 1024, 1, 1, 0),
    layer("l3 1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0),
    layer("l3 3x3 256->256 @14", 256, 14, 256, 3, 1, 1),
    layer("l4 1x1 1024->512 @14", 1024, 14, 512, 1, 1, 0),
    layer("l4 3x3/2 512->512 @14", 512, 14, 512, 3, 2, 1),
    layer("l4 1x1/2 1024->2048 @14", 1024, 14, 2048, 1, 2, 0),
    layer("l4 1x1 512->2048 @7", 512, 7, 2048, 1, 1, 0),
    layer("l4 1x1 2048->512 @7", 2048, 7, 512, 1, 1, 0),
    layer("l4 3x3 512->512 @7", 512, 7, 512, 3, 1, 1),
];

/// The distinct convolutions of VGG-16 (configuration D, 224 x 224 input; conv3_3, conv4_3
/// and conv5_2/5_3 repeat the shapes listed). Chosen as the second network because it is all
/// dense 3x3 convolutions at large spatial sizes with 64 to 512 channels: the register-blocked
/// kernel's regime, next to ResNet-50's 1x1-heavy mix. MobileNetV2 would mostly time its
/// depthwise layers, which are memory-bound and go to the fallback path.
pub const VGG16: &[Layer] = &[
    layer("vgg conv1_1 3x3 3->64 @224", 3, 224, 64, 3, 1, 1),
    layer("vgg conv1_2 3x3 64->64 @224", 64, 224, 64, 3, 1, 1),
    layer("vgg conv2_1 3x3 64->128 @112", 64, 112, 128, 3, 1, 1),
    layer("vgg conv2_2 3x3 128->128 @112", 128, 112, 128, 3, 1, 1),
    layer("vgg conv3_1 3x3 128->256 @56", 128, 56, 256, 3, 1, 1),
    layer("vgg conv3_2 3x3 256->256 @56", 256, 56, 256, 3, 1, 1),
    layer("vgg conv4_1 3x3 256->512 @28", 256, 28, 512, 3, 1, 1),
    layer("vgg conv4_2 3x3 512->512 @28", 512, 28, 512, 3, 1, 1),
    layer("vgg conv5_1 3x3 512->512 @14", 512, 14, 512, 3, 1, 1),
];

/// The distinct convolutions of MobileNetV2 (width 1.0, 224 x 224 input, as torchvision
/// builds it; a layer that repeats with the same shape is listed once). Chosen as the third
/// network for what the other two lack: channel counts that are not multiples of 64 (16, 24,
/// 96, 144, 160, 576, 960), pointwise layers with little work per byte, and depthwise 3x3
/// layers (memory-bound, one input channel per output channel).
pub const MOBILENETV2: &[Layer] = &[
    layer("mbv2 conv 3x3/2 3->32 @224", 3, 224, 32, 3, 2, 1),
    depthwise("mbv2 dw 3x3 32 @112", 32, 112, 1),
    layer("mbv2 pw 1x1 32->16 @112", 32, 112, 16, 1, 1, 0),
    layer("mbv2 pw 1x1 16->96 @112", 16, 112, 96, 1, 1, 0),
    depthwise("mbv2 dw 3x3/2 96 @112", 96, 112, 2),
    layer("mbv2 pw 1x1 96->24 @56", 96, 56, 24, 1, 1, 0),
    layer("mbv2 pw 1x1 24->144 @56", 24, 56, 144, 1, 1, 0),
    depthwise("mbv2 dw 3x3 144 @56", 144, 56, 1),
    layer("mbv2 pw 1x1 144->24 @56", 144, 56, 24, 1, 1, 0),
    depthwise("mbv2 dw 3x3/2 144 @56", 144, 56, 2),
    layer("mbv2 pw 1x1 144->32 @28", 144, 28, 32, 1, 1, 0),
    layer("mbv2 pw 1x1 32->192 @28", 32, 28, 192, 1, 1, 0),
    depthwise("mbv2 dw 3x3 192 @28", 192, 28, 1),
    layer("mbv2 pw 1x1 192->32 @28", 192, 28, 32, 1, 1, 0),
    depthwise("mbv2 dw 3x3/2 192 @28", 192, 28, 2),
    layer("mbv2 pw 1x1 192->64 @14", 192, 14, 64, 1, 1, 0),
    layer("mbv2 pw 1x1 64->384 @14", 64, 14, 384, 1, 1, 0),
    depthwise("mbv2 dw 3x3 384 @14", 384, 14, 1),
    layer("mbv2 pw 1x1 384->64 @14", 384, 14, 64, 1, 1, 0),
    layer("mbv2 pw 1x1 384->96 @14", 384, 14, 96, 1, 1, 0),
    layer("mbv2 pw 1x1 96->576 @14", 96, 14, 576, 1, 1, 0),
    depthwise("mbv2 dw 3x3 576 @14", 576, 14, 1),
    layer("mbv2 pw 1x1 576->96 @14", 576, 14, 96, 1, 1, 0),
    depthwise("mbv2 dw 3x3/2 576 @14", 576, 14, 2),
    layer("mbv2 pw 1x1 576->160 @7", 576, 7, 160, 1, 1, 0),
    layer("mbv2 pw 1x1 160->960 @7", 160, 7, 960, 1, 1, 0),
    depthwise("mbv2 dw 3x3 960 @7", 960, 7, 1),
    layer("mbv2 pw 1x1 960->160 @7", 960, 7, 160, 1, 1, 0),
    layer("mbv2 pw 1x1 960->320 @7", 960, 7, 320, 1, 1, 0),
    layer("mbv2 pw 1x1 320->1280 @7", 320, 7, 1280, 1, 1, 0),
];

/// The distinct convolutions of ResNeXt-50 32x4d (torchvision's `resnext50_32x4d`, 224 x
/// 224 input: bottlenecks of 128 to 1024 channels whose 3x3 convolution has 32 groups of 4
/// to 32 channels, stride on the 3x3 of each stage's first block). Not in `all`: a fourth
/// network, for grouped convolutions, which the other three lack (depthwise aside).
pub const RESNEXT50: &[Layer] = &[
    layer("rx conv1 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3),
    layer("rx l1 1x1 64->128 @56", 64, 56, 128, 1, 1, 0),
    grouped("rx l1 3x3 128 g32 @56", 128, 56, 1, 32),
    layer("rx l1 1x1 128->256 @56", 128, 56, 256, 1, 1, 0),
    layer("rx l1 1x1 64->256 @56", 64, 56, 256, 1, 1, 0),
    layer("rx l1 1x1 256->128 @56", 256, 56, 128, 1, 1, 0),
    layer("rx l2 1x1 256->256 @56", 256, 56, 256, 1, 1, 0),
    grouped("rx l2 3x3/2 256 g32 @56", 256, 56, 2, 32),
    layer("rx l2 1x1 256->512 @28", 256, 28, 512, 1, 1, 0),
    layer("rx l2 1x1/2 256->512 @56", 256, 56, 512, 1, 2, 0),
    layer("rx l2 1x1 512->256 @28", 512, 28, 256, 1, 1, 0),
    grouped("rx l2 3x3 256 g32 @28", 256, 28, 1, 32),
    layer("rx l3 1x1 512->512 @28", 512, 28, 512, 1, 1, 0),
    grouped("rx l3 3x3/2 512 g32 @28", 512, 28, 2, 32),
    layer("rx l3 1x1 512->1024 @14", 512, 14, 1024, 1, 1, 0),
    layer("rx l3 1x1/2 512->1024 @28", 512, 28, 1024, 1, 2, 0),
    layer("rx l3 1x1 1024->512 @14", 1024, 14, 512, 1, 1, 0),
    grouped("rx l3 3x3 512 g32 @14", 512, 14, 1, 32),
    layer("rx l4 1x1 1024->1024 @14", 1024, 14, 1024, 1, 1, 0),
    grouped("rx l4 3x3/2 1024 g32 @14", 1024, 14, 2, 32),
    layer("rx l4 1x1 1024->2048 @7", 1024, 7, 2048, 1, 1, 0),
    layer("rx l4 1x1/2 1024->2048 @14", 1024, 14, 2048, 1, 2, 0),
    layer("rx l4 1x1 2048->1024 @7", 2048, 7, 1024, 1, 1, 0),
    grouped("rx l4 3x3 1024 g32 @7", 1024, 7, 1, 32),
];

/// The layers of `net`: `resnet50`, `vgg16`, `mobilenetv2`, `all` (the three, in that order)
/// or `resnext50`.
pub fn network(net: &str) -> Result<Vec<Layer>> {
    let layers: Vec<&Layer> = match net {
        "resnet50" => RESNET50.iter().collect(),
        "vgg16" => VGG16.iter().collect(),
        "mobilenetv2" => MOBILENETV2.iter().collect(),
        "all" => RESNET50.iter().chain(VGG16).chain(MOBILENETV2).collect(),
        "resnext50" => RESNEXT50.iter().collect(),
        other => bail!("--net takes resnet50, vgg16, mobilenetv2, all or resnext50, not `{other}`"),
    };
    Ok(layers.into_iter().cloned().collect())
}

/// A layer from `spec`, comma-separated `KEY=VALUE`s: `C` input channels, `HW` the input's
/// height and width (or `H` with `W` equal to it), `O` output channels, `K` the filter's
/// height and width, and optionally `S` the stride (1), `P` the padding (`K / 2`), `G` the
/// groups (1; `G=C` with `O=C` is depthwise). Named after its shape (`custom 3x3/2 32->64
/// @56`, with ` p0` where the padding is not `K / 2` and ` g32` for groups), so `--filter`
/// picks among several.
///
/// Errors: an unknown or repeated key, a value that is not a positive number (the padding
/// may be 0), a missing C, HW, O or K, groups that do not divide C and O, or a filter larger
/// than the padded input.
pub fn custom(spec: &str) -> Result<Layer> {
    let mut v: [Option<usize>; 7] = [None; 7];
    const KEYS: [&str; 7] = ["C", "HW", "O", "K", "S", "P", "G"];
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .with_context(|| format!("--layer `{spec}`: `{part}` is not KEY=VALUE"))?;
        let key = match key.trim().to_ascii_uppercase().as_str() {
            "H" | "W" | "H=W" => "HW".to_string(),
            k => k.to_string(),
        };
        let i = KEYS.iter().position(|k| *k == key).with_context(|| {
            format!("--layer `{spec}`: unknown key `{key}` (keys: C, HW, O, K, S, P, G)")
        })?;
        let n: usize = value.trim().parse().with_context(|| {
            format!("--layer `{spec}`: {key} = `{value}` is not a whole number")
        })?;
        if n == 0 && key != "P" {
            bail!("--layer `{spec}`: {key} must be at least 1");
        }
        if v[i].is_some_and(|old| old != n) {
            bail!("--layer `{spec}`: {key} is given twice");
        }
        v[i] = Some(n);
    }
    let need = |i: usize| v[i].with_context(|| format!("--layer `{spec}`: {} is missing", KEYS[i]));
    let (c, hw, o, k) = (need(0)?, need(1)?, need(2)?, need(3)?);
    let (stride, pad, groups) = (v[4].unwrap_or(1), v[5].unwrap_or(k / 2), v[6].unwrap_or(1));
    if !c.is_multiple_of(groups) || !o.is_multiple_of(groups) {
        bail!("--layer `{spec}`: {groups} groups do not divide C = {c} and O = {o}");
    }
    if hw + 2 * pad < k {
        bail!("--layer `{spec}`: a {k}x{k} filter is larger than the padded {hw} x {hw} input");
    }
    let mut name = format!("custom {k}x{k}");
    if stride > 1 {
        name += &format!("/{stride}");
    }
    name += &format!(" {c}->{o} @{hw}");
    if pad != k / 2 {
        name += &format!(" p{pad}");
    }
    if groups > 1 {
        name += &format!(" g{groups}");
    }
    Ok(Layer {
        name: Cow::Owned(name),
        c,
        hw,
        o,
        k,
        stride,
        pad,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ResNeXt-50 32x4d: 24 distinct convolutions, the 3x3 ones grouped (32 groups of 4 to 32
    /// channels), every one a valid convolution whose name gives its shape; not in `all`.
    #[test]
    fn resnext50_lists_its_grouped_bottlenecks() {
        let rx = network("resnext50").unwrap();
        assert_eq!(rx.len(), 24);
        let grouped: Vec<_> = rx.iter().filter(|l| l.groups > 1).collect();
        assert_eq!(grouped.len(), 7);
        for l in &grouped {
            assert_eq!((l.groups, l.k, l.o), (32, 3, l.c));
            assert!([4, 8, 16, 32].contains(&(l.c / l.groups)), "{}", l.name);
            assert!(l.name.contains(&format!("{} g32 @{}", l.c, l.hw)));
        }
        for l in &rx {
            let (x, w) = l.dims(2).unwrap();
            l.conv().output_dims(&x, &w).unwrap();
        }
        let all = network("all").unwrap();
        assert!(all.iter().all(|l| !l.name.starts_with("rx ")));
        assert!(network("resnext").is_err());
    }

    #[test]
    fn custom_layers_parse_with_defaults_and_name_their_shape() {
        let l = custom("C=32,HW=56,O=64,K=3").unwrap();
        assert_eq!(
            (l.c, l.hw, l.o, l.k, l.stride, l.pad, l.groups),
            (32, 56, 64, 3, 1, 1, 1)
        );
        assert_eq!(l.name, "custom 3x3 32->64 @56");
        let l = custom(" c=96, h=14 ,o=96,k=3,s=2,g=96,p=0 ").unwrap();
        assert_eq!((l.stride, l.pad, l.groups), (2, 0, 96));
        assert_eq!(l.name, "custom 3x3/2 96->96 @14 p0 g96");
        let l = custom("C=3,HW=224,O=64,K=7,S=2").unwrap();
        assert_eq!((l.pad, l.name.as_ref()), (3, "custom 7x7/2 3->64 @224"));
        assert_eq!(l.conv().stride, [2, 2]);
    }

    #[test]
    fn bad_layer_specs_say_what_is_wrong() {
        for (spec, needle) in [
            ("C=32,HW=56,O=64", "K is missing"),
            ("C=32,HW=56,O=64,K=3,X=1", "unknown key `X`"),
            ("C=32,HW=56,O=64,K=three", "not a whole number"),
            ("C=0,HW=56,O=64,K=3", "C must be at least 1"),
            ("C=32,HW=56,O=64,K=3,C=16", "C is given twice"),
            ("C=30,HW=56,O=64,K=3,G=4", "do not divide"),
            ("C=32,HW=2,O=64,K=7,P=0", "larger than the padded"),
            ("C32,HW=56", "not KEY=VALUE"),
        ] {
            let e = custom(spec).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }
}

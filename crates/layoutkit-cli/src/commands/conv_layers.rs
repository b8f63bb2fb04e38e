//! The convolution layers `layoutkit conv bench` times: ResNet-50's, VGG-16's and
//! MobileNetV2's.

use anyhow::Result;
use layoutkit_core::conv::Conv2d;
use layoutkit_core::Dims;

/// One convolution layer: name, input channels, input size, output channels, kernel, stride,
/// padding, groups (C for a depthwise layer).
pub struct Layer {
    pub name: &'static str,
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
        name,
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
    Layer {
        name,
        c,
        hw,
        o: c,
        k: 3,
        stride,
        pad: 1,
        groups: c,
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

/// The layers of `net`: `resnet50`, `vgg16`, `mobilenetv2` or `all` (the three, in that
/// order).
pub fn network(net: &str) -> anyhow::Result<Vec<&'static Layer>> {
    Ok(match net {
        "resnet50" => RESNET50.iter().collect(),
        "vgg16" => VGG16.iter().collect(),
        "mobilenetv2" => MOBILENETV2.iter().collect(),
        "all" => RESNET50.iter().chain(VGG16).chain(MOBILENETV2).collect(),
        other => anyhow::bail!("--net takes resnet50, vgg16, mobilenetv2 or all, not `{other}`"),
    })
}

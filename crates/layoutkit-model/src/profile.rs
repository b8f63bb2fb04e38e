//! Packing profiles: the layout each engine wants for each role.

use std::fmt;
use std::str::FromStr;

use layoutkit_core::DType;

use crate::roles::Role;
use crate::Error;

/// An engine's weight layouts. Roles a profile has no layout for are stored in their source
/// layout (cast to the chosen element type).
///
/// | role | `mace-gpu` | `onednn-avx2` | `onednn-avx512` | `cudnn-nhwc` | `tensorrt-int8` | `layoutkit-cuda` |
/// |---|---|---|---|---|---|---|
/// | conv | `mace:conv2d_filter` (`mace:winograd_filter:B` with `--winograd B`) | `OIhw8i8o` | `OIhw16i16o` | `OHWI` | `OIHW32i` i8 | `OHWI` |
/// | depthwise | `mace:dw_conv2d_filter` | `Goihw8g` | `Goihw16g` | `OHWI` | `OIHW` i8 | `OHWI` |
/// | grouped | OIHW | `gOIhw8i8o` | `gOIhw16i16o` | `OHWI` | `OIHW32i` i8 | `OHWI` |
/// | deconv | `mace:conv2d_filter` (group 1) | `OIhw8i8o` / `gOIhw8i8o` | `OIhw16i16o` / `gOIhw16i16o` | `IHWO` | IOHW i8 | IOHW |
/// | dense | `mace:weight_width` | `OI8i8o` | `OI16i16o` | `OI` | `OI` i8 | `OI` |
/// | bias, vector | `mace:argument` | plain | plain | plain | plain (f32) | plain |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// MACE's OpenCL image runtime (XiaoMi/mace): filters, depthwise filters, FC weights and
    /// arguments as RGBA images (its `*_buffer_to_image` kernels' layouts), Winograd-transformed
    /// 3x3 filters with `--winograd 2|4`. MACE stores weights as f16 by default (`--dtype f16`).
    MaceGpu,
    /// oneDNN's AVX2 convolutions: 8x8 blocked filters (`OIhw8i8o`, grouped `gOIhw8i8o`,
    /// depthwise `Goihw8g`), inner-product weights `OI8i8o`.
    OnednnAvx2,
    /// oneDNN's AVX-512 convolutions: 16x16 blocked filters (`OIhw16i16o`, `gOIhw16i16o`,
    /// depthwise `Goihw16g`), inner-product weights `OI16i16o`.
    OnednnAvx512,
    /// cuDNN and CUTLASS NHWC convolutions: filters `OHWI` (KRSC), transposed-convolution
    /// filters `IHWO`, dense weights `[O, I]`.
    CudnnNhwc,
    /// TensorRT int8 (NC/32HW32 engines): filters `OIHW32i` (input channels in blocks of 32,
    /// cuDNN's `NCHW_VECT_C` filter order), int8 with one symmetric scale per output channel
    /// (`scale = max|w| / 127`, zero point 0); biases stay float.
    TensorrtInt8,
    /// layoutkit's own CUDA convolution (`layoutkit conv --device cuda`): filters `OHWI`.
    LayoutkitCuda,
}

impl Profile {
    /// Every profile, in the order the help lists them.
    pub const ALL: [Profile; 6] = [
        Profile::MaceGpu,
        Profile::OnednnAvx2,
        Profile::OnednnAvx512,
        Profile::CudnnNhwc,
        Profile::TensorrtInt8,
        Profile::LayoutkitCuda,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::MaceGpu => "mace-gpu",
            Profile::OnednnAvx2 => "onednn-avx2",
            Profile::OnednnAvx512 => "onednn-avx512",
            Profile::CudnnNhwc => "cudnn-nhwc",
            Profile::TensorrtInt8 => "tensorrt-int8",
            Profile::LayoutkitCuda => "layoutkit-cuda",
        }
    }

    /// The element type of the packed filters and weights when `--dtype` is not given
    /// (`None`: the source's).
    pub fn default_dtype(self) -> Option<DType> {
        match self {
            Profile::TensorrtInt8 => Some(DType::I8),
            _ => None,
        }
    }

    /// The target layout of `role`; `winograd` is the block size when the filter is to be
    /// Winograd-transformed (MACE only). `None`: the tensor keeps its source layout.
    pub fn target(self, role: Role, winograd: Option<u8>) -> Option<String> {
        use Profile::*;
        let s = match (self, role) {
            (_, Role::Keep) => return None,
            (MaceGpu, Role::Conv) => {
                return Some(match winograd {
                    Some(b) => format!("mace:winograd_filter:{b}"),
                    None => "mace:conv2d_filter".into(),
                })
            }
            (MaceGpu, Role::Depthwise { .. }) => "mace:dw_conv2d_filter",
            (MaceGpu, Role::Deconv { groups: 1 }) => "mace:conv2d_filter",
            (MaceGpu, Role::Dense { .. }) => "mace:weight_width",
            (MaceGpu, Role::Bias | Role::Vector) => "mace:argument",
            (MaceGpu, _) => return None,
            (OnednnAvx2, Role::Conv | Role::Deconv { groups: 1 }) => "OIhw8i8o",
            (OnednnAvx2, Role::Grouped { .. } | Role::Deconv { .. }) => "gOIhw8i8o",
            (OnednnAvx2, Role::Depthwise { .. }) => "Goihw8g",
            (OnednnAvx2, Role::Dense { .. }) => "OI8i8o",
            (OnednnAvx512, Role::Conv | Role::Deconv { groups: 1 }) => "OIhw16i16o",
            (OnednnAvx512, Role::Grouped { .. } | Role::Deconv { .. }) => "gOIhw16i16o",
            (OnednnAvx512, Role::Depthwise { .. }) => "Goihw16g",
            (OnednnAvx512, Role::Dense { .. }) => "OI16i16o",
            (
                CudnnNhwc | LayoutkitCuda,
                Role::Conv | Role::Depthwise { .. } | Role::Grouped { .. },
            ) => "OHWI",
            (CudnnNhwc, Role::Deconv { .. }) => "IHWO",
            (TensorrtInt8, Role::Conv | Role::Grouped { .. }) => "OIHW32i",
            (TensorrtInt8, Role::Depthwise { .. }) => "OIHW",
            (TensorrtInt8, Role::Deconv { .. }) => "IOHW",
            (CudnnNhwc | TensorrtInt8 | LayoutkitCuda, Role::Dense { .. }) => "OI",
            (_, Role::Bias | Role::Vector) => return None,
            (LayoutkitCuda, Role::Deconv { .. }) => return None,
        };
        Some(s.to_string())
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = Error;

    fn from_str(s: &str) -> Result<Profile, Error> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| Error::UnknownProfile(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_parses() {
        let roles = [
            Role::Conv,
            Role::Depthwise { multiplier: 1 },
            Role::Grouped { groups: 2 },
            Role::Deconv { groups: 1 },
            Role::Deconv { groups: 2 },
            Role::Dense { transposed: false },
            Role::Bias,
            Role::Vector,
            Role::Keep,
        ];
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>().ok(), Some(p));
            for r in roles {
                for w in [None, Some(2), Some(4)] {
                    if let Some(t) = p.target(r, w) {
                        layoutkit_core::parse_format(&t).unwrap();
                    }
                }
            }
        }
        assert!("mace"
            .parse::<Profile>()
            .unwrap_err()
            .to_string()
            .contains("mace-gpu"));
    }
}

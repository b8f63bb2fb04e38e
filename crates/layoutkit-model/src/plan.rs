//! The plan of one tensor: how its stored bytes are read (the source view: a layout of the
//! role's axes over the same bytes), the target layout, the element types and the
//! quantisation. Choosing is all this crate does; the conversions are `layoutkit-cpu`'s.

use std::path::Path;

use layoutkit_core::{parse_format, Axis, DType, Dims, Layout, ShapedLayout};

use crate::roles::{vector_len, Assignment, Role};
use crate::source::SourceTensor;
use crate::{ElementType, Error, PackOptions, Result};

/// A layout over a tensor's stored bytes with the axes of its role, e.g. a depthwise filter
/// `[C·M, 1, KH, KW]` read as `IMHW` (I = C, M) for MACE or `GOIHW` (G = C, O = M, I = 1) for
/// oneDNN. `channels`: the axes whose coordinates make the output channel, outer first.
#[derive(Clone, Debug)]
pub struct View {
    pub layout: Layout,
    pub dims: Dims,
    pub channels: Vec<Axis>,
}

fn axis(c: char) -> Axis {
    Axis::from_letter(c).unwrap_or_else(|| unreachable!("`{c}` is a letter"))
}

fn view(layout: &str, dims: &[(char, usize)], channels: &str) -> Result<View, String> {
    let layout = parse_format(layout).map_err(|e| e.to_string())?;
    let dims =
        Dims::new(dims.iter().map(|&(c, n)| (axis(c), n)).collect()).map_err(|e| e.to_string())?;
    Ok(View {
        layout,
        dims,
        channels: channels.chars().map(axis).collect(),
    })
}

/// The views a role allows over a tensor of `shape`, the plain one first.
pub fn views(role: Role, shape: &[usize]) -> Result<Vec<View>, String> {
    let filter = || -> Result<[usize; 4], String> {
        match *shape {
            [o, i, h, w] => Ok([o, i, h, w]),
            [o, i, k] => Ok([o, i, 1, k]),
            _ => Err(format!(
                "{role} needs a filter of rank 4 ([O, I, KH, KW]) or 3 ([O, I, K]), not shape {shape:?}"
            )),
        }
    };
    let divide = |n: usize, by: usize, what: &str| {
        if by > 0 && n.is_multiple_of(by) {
            Ok(n / by)
        } else {
            Err(format!(
                "{role}: {what} {n} is not a multiple of {by} (shape {shape:?})"
            ))
        }
    };
    Ok(match role {
        Role::Conv => {
            let [o, i, h, w] = filter()?;
            vec![view(
                "OIHW",
                &[('O', o), ('I', i), ('H', h), ('W', w)],
                "O",
            )?]
        }
        Role::Depthwise { multiplier: m } => {
            let [o, i, h, w] = filter()?;
            if i != 1 {
                return Err(format!(
                    "a depthwise filter has one input channel per group ([C·M, 1, KH, KW]); shape {shape:?} has {i}"
                ));
            }
            let c = divide(o, m, "the output channel count")?;
            vec![
                view("OIHW", &[('O', o), ('I', 1), ('H', h), ('W', w)], "O")?,
                view("IMHW", &[('I', c), ('M', m), ('H', h), ('W', w)], "IM")?,
                view(
                    "GOIHW",
                    &[('G', c), ('O', m), ('I', 1), ('H', h), ('W', w)],
                    "GO",
                )?,
            ]
        }
        Role::Grouped { groups: g } => {
            let [o, i, h, w] = filter()?;
            let og = divide(o, g, "the output channel count")?;
            vec![
                view("OIHW", &[('O', o), ('I', i), ('H', h), ('W', w)], "O")?,
                view(
                    "GOIHW",
                    &[('G', g), ('O', og), ('I', i), ('H', h), ('W', w)],
                    "GO",
                )?,
            ]
        }
        Role::Deconv { groups: g } => {
            let [i, o, h, w] = filter()?;
            let ig = divide(i, g, "the input channel count")?;
            let mut v = vec![view(
                "IOHW",
                &[('I', i), ('O', o), ('H', h), ('W', w)],
                "O",
            )?];
            if g > 1 {
                v.push(view(
                    "GIOHW",
                    &[('G', g), ('I', ig), ('O', o), ('H', h), ('W', w)],
                    "GO",
                )?);
            }
            v
        }
        Role::Dense { transposed } => {
            let [a, b] = *shape else {
                return Err(format!(
                    "{role} needs a weight of rank 2, not shape {shape:?}"
                ));
            };
            if transposed {
                vec![
                    view("IO", &[('I', a), ('O', b)], "O")?,
                    view("IOHW", &[('I', a), ('O', b), ('H', 1), ('W', 1)], "O")?,
                ]
            } else {
                vec![
                    view("OI", &[('O', a), ('I', b)], "O")?,
                    view("OIHW", &[('O', a), ('I', b), ('H', 1), ('W', 1)], "O")?,
                ]
            }
        }
        Role::Bias | Role::Vector => {
            let l = vector_len(shape).ok_or_else(|| {
                format!("{role} needs one run of values ([L], [1, L]), not shape {shape:?}")
            })?;
            vec![view("W", &[('W', l)], "")?]
        }
        Role::Keep => vec![view("W", &[('W', shape.iter().product())], "")?],
    })
}

/// How a tensor is packed.
// One per tensor and never in a hot loop: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Op {
    /// Bytes unchanged (a type the converters do not take, e.g. `i64`).
    Raw,
    /// `view` -> `target` through `layoutkit-cpu`, cast to the destination type.
    Convert {
        view: View,
        /// As named (profile or rule), e.g. `mace:conv2d_filter`.
        target_name: String,
        target: ShapedLayout,
        /// The Winograd transform (`mace:winograd_filter:B`).
        winograd: bool,
        /// Quantised per output channel: the plain layout with the channel axes outermost
        /// (the scales' order) and the number of channels.
        quant: Option<(ShapedLayout, usize)>,
    },
}

/// The plan of one tensor.
#[derive(Clone, Debug)]
pub struct TensorPlan {
    pub name: String,
    pub assignment: Assignment,
    pub src_dtype: ElementType,
    pub src_shape: Vec<usize>,
    pub dst_dtype: ElementType,
    /// The physical array written (the source shape where the layout is unchanged).
    pub dst_shape: Vec<usize>,
    pub op: Op,
}

impl TensorPlan {
    pub fn src_bytes(&self) -> usize {
        self.src_shape.iter().product::<usize>() * self.src_dtype.size_bytes()
    }

    pub fn dst_bytes(&self) -> usize {
        self.dst_shape.iter().product::<usize>() * self.dst_dtype.size_bytes()
    }

    /// The name of the per-channel scale tensor written next to a quantised tensor.
    pub fn scale_name(&self) -> Option<String> {
        match &self.op {
            Op::Convert { quant: Some(_), .. } => Some(format!("{}:scale", self.name)),
            _ => None,
        }
    }

    /// Channels of the scale tensor (0 when not quantised).
    pub fn channels(&self) -> usize {
        match &self.op {
            Op::Convert {
                quant: Some((_, n)),
                ..
            } => *n,
            _ => 0,
        }
    }

    /// `(source layout, target layout as named, canonical target)`; `-` for raw tensors.
    pub fn layouts(&self) -> (String, String, String) {
        match &self.op {
            Op::Raw => ("-".into(), "-".into(), "-".into()),
            Op::Convert {
                view,
                target_name,
                target,
                ..
            } => (
                view.layout.to_string(),
                target_name.clone(),
                target.layout().to_string(),
            ),
        }
    }

    /// The logical dims the target layout sees (`-` for raw tensors).
    pub fn dims(&self) -> String {
        match &self.op {
            Op::Raw => "-".into(),
            Op::Convert { view, .. } => view.dims.to_string(),
        }
    }
}

/// Plans `tensor` under `assignment` and the pack options.
pub fn plan_tensor(
    path: &Path,
    tensor: &SourceTensor,
    assignment: Assignment,
    opts: &PackOptions,
) -> Result<TensorPlan> {
    let err = |reason: String| Error::Tensor {
        path: path.to_path_buf(),
        tensor: tensor.name.clone(),
        reason,
    };
    let role = assignment.role;
    let Some(src) = tensor.dtype.core() else {
        if role != Role::Keep || assignment.layout.is_some() {
            return Err(err(format!(
                "{} tensors are stored unchanged; a rule can only say `keep` for them",
                tensor.dtype
            )));
        }
        return Ok(TensorPlan {
            name: tensor.name.clone(),
            assignment,
            src_dtype: tensor.dtype,
            src_shape: tensor.shape.clone(),
            dst_dtype: tensor.dtype,
            dst_shape: tensor.shape.clone(),
            op: Op::Raw,
        });
    };
    let want = opts.dtype.or(opts.profile.default_dtype());
    let dst = match want {
        Some(t) if t.is_float() && src.is_float() => t,
        Some(t) if !t.is_float() && src.is_float() && role.is_quantised() => t,
        _ => src,
    };
    if !dst.is_float() && dst != src && dst != DType::I8 {
        return Err(Error::Options(format!(
            "--dtype {dst}: packed weights are f32, f16, bf16 or i8 (per-channel symmetric)"
        )));
    }
    let views = views(role, &tensor.shape).map_err(&err)?;
    let winograd = match opts.winograd {
        Some(b) if assignment.winograd && role == Role::Conv => Some(b),
        _ => None,
    };
    let target_name = assignment
        .layout
        .clone()
        .or_else(|| opts.profile.target(role, winograd))
        .unwrap_or_else(|| views[0].layout.to_string());
    let layout = parse_format(&target_name).map_err(|e| err(e.to_string()))?;
    let is_winograd = layout.transform().is_some();
    let chosen = if is_winograd {
        if role != Role::Conv {
            return Err(err(format!(
                "{target_name} transforms convolution filters, not a {role} tensor"
            )));
        }
        if !dst.is_float() {
            return Err(err(format!(
                "{target_name}: Winograd filters are float; use --dtype f16 or f32"
            )));
        }
        views[0].clone()
    } else {
        views
            .iter()
            .find(|v| v.layout.same_axes(&layout))
            .cloned()
            .ok_or_else(|| {
                let names: Vec<String> = views.iter().map(|v| v.layout.to_string()).collect();
                err(format!(
                    "{target_name} has axes {} but a {role} tensor of shape {:?} reads as {}",
                    layout.axes_string(),
                    tensor.shape,
                    names.join(" or ")
                ))
            })?
    };
    let target = layout
        .shaped(&chosen.dims)
        .map_err(|e| err(e.to_string()))?;
    let quant = if dst != src && !dst.is_float() {
        let mut letters: String = chosen.channels.iter().map(|a| a.letter()).collect();
        letters.extend(
            chosen
                .layout
                .axes()
                .iter()
                .filter(|a| !chosen.channels.contains(a))
                .map(|a| a.letter()),
        );
        let q = parse_format(&letters)
            .and_then(|l| l.shaped(&chosen.dims))
            .map_err(|e| err(e.to_string()))?;
        let n = chosen
            .channels
            .iter()
            .map(|&a| chosen.dims.get(a).unwrap_or(1))
            .product();
        Some((q, n))
    } else {
        None
    };
    let identity = !is_winograd && target.layout().to_string() == chosen.layout.to_string();
    let dst_shape = if identity {
        tensor.shape.clone()
    } else {
        target.array_shape()
    };
    Ok(TensorPlan {
        name: tensor.name.clone(),
        assignment,
        src_dtype: tensor.dtype,
        src_shape: tensor.shape.clone(),
        dst_dtype: ElementType::from_core(dst),
        dst_shape,
        op: Op::Convert {
            view: chosen,
            target_name,
            target,
            winograd: is_winograd,
            quant,
        },
    })
}

//! Weight roles: what a tensor is to the engine (a convolution filter, a depthwise filter, a
//! dense weight, a bias, ...), from the ONNX graph where there is one, else from `--rule`s and
//! shapes.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crate::onnx::Node;
use crate::rules::Rule;
use crate::{ElementType, Error, Result};

/// What a weight is to the engine that consumes it. Each role fixes how the stored tensor is
/// read (its source layout): the packer never guesses an axis order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A convolution filter `[O, I, KH, KW]` (ONNX Conv with `group` 1; `[O, I, K]` for 1-D).
    Conv,
    /// A depthwise filter `[C·M, 1, KH, KW]` (ONNX Conv with `group` = C input channels),
    /// `multiplier` = M output channels per input channel.
    Depthwise { multiplier: usize },
    /// A grouped convolution filter `[O, I/G, KH, KW]`, `1 < G`, not depthwise.
    Grouped { groups: usize },
    /// A transposed-convolution filter `[I, O/G, KH, KW]` (ONNX ConvTranspose).
    Deconv { groups: usize },
    /// A dense (fully connected) weight: `[O, I]` (PyTorch `Linear`, ONNX Gemm with
    /// `transB = 1`), or `[I, O]` when `transposed` (ONNX MatMul, Gemm with `transB = 0`).
    Dense { transposed: bool },
    /// A bias: `L` values added per output channel (`[L]`, or `[1, L]` in Gemm's `C`).
    Bias,
    /// Another per-channel vector: normalisation scale and offset, PReLU slopes.
    Vector,
    /// Anything else (embeddings, shapes, constants): stored unchanged, floats cast to the
    /// chosen float type.
    Keep,
}

impl Role {
    /// Parses a role as written in a rule: `conv`, `depthwise` (multiplier 1), `depthwise:M`,
    /// `grouped:G`, `deconv`, `deconv:G`, `dense` (`[O, I]`), `dense-io` (`[I, O]`), `bias`,
    /// `vector`, `keep`.
    pub fn parse(s: &str) -> Option<Role> {
        let (name, n) = match s.split_once(':') {
            Some((name, n)) => (name, Some(n.parse::<usize>().ok().filter(|&n| n > 0)?)),
            None => (s, None),
        };
        Some(match (name, n) {
            ("conv", None) => Role::Conv,
            ("depthwise", m) => Role::Depthwise {
                multiplier: m.unwrap_or(1),
            },
            ("grouped", Some(groups)) => Role::Grouped { groups },
            ("deconv", g) => Role::Deconv {
                groups: g.unwrap_or(1),
            },
            ("dense", None) => Role::Dense { transposed: false },
            ("dense-io", None) => Role::Dense { transposed: true },
            ("bias", None) => Role::Bias,
            ("vector", None) => Role::Vector,
            ("keep", None) => Role::Keep,
            _ => return None,
        })
    }

    /// Whether a `--dtype i8` pack quantises this role (per output channel).
    pub fn is_quantised(self) -> bool {
        matches!(
            self,
            Role::Conv
                | Role::Depthwise { .. }
                | Role::Grouped { .. }
                | Role::Deconv { .. }
                | Role::Dense { .. }
        )
    }
}

impl fmt::Display for Role {
    /// The rule spelling ([`Role::parse`] reads it back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Conv => write!(f, "conv"),
            Role::Depthwise { multiplier: 1 } => write!(f, "depthwise"),
            Role::Depthwise { multiplier } => write!(f, "depthwise:{multiplier}"),
            Role::Grouped { groups } => write!(f, "grouped:{groups}"),
            Role::Deconv { groups: 1 } => write!(f, "deconv"),
            Role::Deconv { groups } => write!(f, "deconv:{groups}"),
            Role::Dense { transposed: false } => write!(f, "dense"),
            Role::Dense { transposed: true } => write!(f, "dense-io"),
            Role::Bias => write!(f, "bias"),
            Role::Vector => write!(f, "vector"),
            Role::Keep => write!(f, "keep"),
        }
    }
}

/// One consumer of a weight in the graph and the role it gives.
#[derive(Clone, Debug)]
pub(crate) struct Use {
    pub role: Role,
    /// A 3x3 convolution with stride 1 and dilation 1 (Winograd can replace it).
    pub winograd: bool,
    pub node: String,
}

/// Every role-giving use of one weight.
#[derive(Clone, Debug, Default)]
pub(crate) struct GraphRole {
    pub uses: Vec<Use>,
}

/// The roles the nodes of a graph give to its weights (`shapes`: the weights and their shapes).
/// Identity nodes (exporters insert them for shared weights) are followed back to the weight.
pub(crate) fn from_graph<'n>(
    nodes: &'n [Node],
    shapes: &HashMap<&str, &[usize]>,
) -> HashMap<String, GraphRole> {
    let alias: HashMap<&'n str, &'n str> = nodes
        .iter()
        .filter(|n| n.op == "Identity")
        .filter_map(|n| Some((n.outputs.first()?.as_str(), n.inputs.first()?.as_str())))
        .collect();
    let resolve = |mut name: &'n str| -> &'n str {
        for _ in 0..64 {
            match alias.get(name) {
                Some(next) => name = next,
                None => break,
            }
        }
        name
    };
    let producer: HashMap<&str, &str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(move |o| (o.as_str(), n.op.as_str())))
        .collect();
    let mut roles: HashMap<String, GraphRole> = HashMap::new();
    for (index, node) in nodes.iter().enumerate() {
        let input = |k: usize| {
            node.inputs
                .get(k)
                .filter(|s| !s.is_empty())
                .map(|s| resolve(s))
                .filter(|s| shapes.contains_key(s))
        };
        let mut push = |name: &str, role: Role, winograd: bool| {
            roles.entry(name.to_string()).or_default().uses.push(Use {
                role,
                winograd,
                node: node.describe(index),
            })
        };
        let rank = |name: &str| shapes.get(name).map_or(0, |s| s.len());
        let ones = |key: &str| {
            node.int_lists
                .get(key)
                .is_none_or(|v| v.iter().all(|&x| x == 1))
        };
        match node.op.as_str() {
            "Conv" => {
                let groups = node.ints.get("group").copied().unwrap_or(1).max(1) as usize;
                if let Some(w) = input(1) {
                    let s = shapes[w];
                    if s.len() == 3 || s.len() == 4 {
                        let role = if groups == 1 {
                            Role::Conv
                        } else if s[1] == 1 && s[0].is_multiple_of(groups) {
                            Role::Depthwise {
                                multiplier: s[0] / groups,
                            }
                        } else {
                            Role::Grouped { groups }
                        };
                        let winograd = groups == 1
                            && s.len() == 4
                            && s[2] == 3
                            && s[3] == 3
                            && ones("strides")
                            && ones("dilations");
                        push(w, role, winograd);
                    } else {
                        push(w, Role::Keep, false);
                    }
                }
                if let Some(b) = input(2) {
                    push(b, Role::Bias, false);
                }
            }
            "ConvTranspose" => {
                let groups = node.ints.get("group").copied().unwrap_or(1).max(1) as usize;
                if let Some(w) = input(1) {
                    let role = if matches!(rank(w), 3 | 4) {
                        Role::Deconv { groups }
                    } else {
                        Role::Keep
                    };
                    push(w, role, false);
                }
                if let Some(b) = input(2) {
                    push(b, Role::Bias, false);
                }
            }
            "Gemm" => {
                let trans_b = node.ints.get("transB").copied().unwrap_or(0) != 0;
                if let Some(a) = input(0) {
                    push(a, Role::Keep, false);
                }
                if let Some(b) = input(1) {
                    push(
                        b,
                        Role::Dense {
                            transposed: !trans_b,
                        },
                        false,
                    );
                }
                if let Some(c) = input(2) {
                    let s = shapes[c];
                    let bias = s.len() == 1 || (s.len() == 2 && s[0] == 1);
                    push(c, if bias { Role::Bias } else { Role::Keep }, false);
                }
            }
            "MatMul" => {
                if let Some(a) = input(0) {
                    push(a, Role::Keep, false);
                }
                if let Some(b) = input(1) {
                    let role = if rank(b) == 2 {
                        Role::Dense { transposed: true }
                    } else {
                        Role::Keep
                    };
                    push(b, role, false);
                }
            }
            "Add" => {
                // MatMul + Add is how exporters write a dense layer with a bias.
                for (w, other) in [(0, 1), (1, 0)] {
                    let from_dense = node
                        .inputs
                        .get(other)
                        .and_then(|o| producer.get(o.as_str()))
                        .is_some_and(|op| *op == "MatMul" || *op == "Gemm");
                    if let Some(b) = input(w) {
                        if from_dense && rank(b) == 1 {
                            push(b, Role::Bias, false);
                        }
                    }
                }
            }
            "BatchNormalization" => {
                for k in 1..=4 {
                    if let Some(v) = input(k) {
                        push(v, Role::Vector, false);
                    }
                }
            }
            "InstanceNormalization" | "LayerNormalization" => {
                for k in 1..=2 {
                    if let Some(v) = input(k).filter(|v| rank(v) == 1) {
                        push(v, Role::Vector, false);
                    }
                }
            }
            "PRelu" => {
                if let Some(v) = input(1).filter(|v| vector_len(shapes[v]).is_some()) {
                    push(v, Role::Vector, false);
                }
            }
            _ => {}
        }
    }
    roles
}

/// `L` when a shape holds one run of `L` values (`[L]`, `[1, L]`, `[L, 1, 1]`).
pub(crate) fn vector_len(shape: &[usize]) -> Option<usize> {
    let big: Vec<usize> = shape.iter().copied().filter(|&d| d != 1).collect();
    match big.as_slice() {
        [] if !shape.is_empty() => Some(1),
        [l] => Some(*l),
        _ => None,
    }
}

/// The role a weight's shape gives it when there is no graph: `[O, I, KH, KW]` with `I > 1`
/// is a convolution filter, `[O, I]` a dense weight (PyTorch's `[out, in]`; names containing
/// `embed` are kept as they are), 1-D a bias (names ending in `bias`) or another vector;
/// anything else is kept. `[O, 1, KH, KW]` is ambiguous (depthwise, or a convolution with
/// one input channel): the error asks for a rule.
pub(crate) fn from_shape(name: &str, shape: &[usize], dtype: ElementType) -> Result<Role, String> {
    if !dtype.is_core_float() {
        return Ok(Role::Keep);
    }
    Ok(match shape.len() {
        4 if shape[1] > 1 => Role::Conv,
        4 => {
            return Err(format!(
                "shape {shape:?} is a depthwise filter or a convolution filter with one input channel; \
                 add a rule such as --rule '{name}=depthwise' or --rule '{name}=conv'"
            ))
        }
        2 if name.to_ascii_lowercase().contains("embed") => Role::Keep,
        2 => Role::Dense { transposed: false },
        1 if name.ends_with("bias") => Role::Bias,
        1 => Role::Vector,
        _ => Role::Keep,
    })
}

/// The role of a tensor, where it came from, and the layout a rule asks for.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub role: Role,
    /// Eligible for a Winograd transform (from the graph: 3x3, stride 1, dilation 1, group 1).
    pub winograd: bool,
    /// The target layout a rule names (overrides the profile's).
    pub layout: Option<String>,
    /// `graph (Conv node 'c1')`, `shape`, or `rule 'x=y'`.
    pub origin: String,
}

/// Decides a tensor's role: the first matching rule, else the graph's uses (all of them must
/// agree), else its shape.
pub(crate) fn assign(
    path: &Path,
    name: &str,
    shape: &[usize],
    dtype: ElementType,
    graph: Option<&HashMap<String, GraphRole>>,
    rules: &[Rule],
) -> Result<Assignment> {
    let rule = rules.iter().find(|r| r.matches(name));
    let ambiguous = |reason: String| Error::AmbiguousRole {
        path: path.to_path_buf(),
        tensor: name.to_string(),
        reason,
    };
    let from_graph = graph.map(|g| -> Result<(Role, bool, String), String> {
        let Some(gr) = g.get(name).filter(|gr| !gr.uses.is_empty()) else {
            return Ok((Role::Keep, false, "graph (no node gives it a role)".into()));
        };
        let first = &gr.uses[0];
        let same = |a: Role, b: Role| {
            a == b
                || matches!(
                    (a, b),
                    (Role::Bias, Role::Vector) | (Role::Vector, Role::Bias)
                )
        };
        if let Some(other) = gr.uses.iter().find(|u| !same(u.role, first.role)) {
            return Err(format!(
                "{} uses it as {} but {} uses it as {}; add a rule such as --rule '{name}={}'",
                first.node, first.role, other.node, other.role, first.role
            ));
        }
        let role = if gr.uses.iter().any(|u| u.role == Role::Bias) {
            Role::Bias
        } else {
            first.role
        };
        let winograd = gr.uses.iter().all(|u| u.winograd);
        let nodes: Vec<&str> = gr.uses.iter().map(|u| u.node.as_str()).collect();
        Ok((role, winograd, format!("graph ({})", nodes.join(", "))))
    });
    if let Some(rule) = rule {
        if let Some(role) = rule.role {
            let winograd = matches!(&from_graph, Some(Ok((Role::Conv, true, _))));
            return Ok(Assignment {
                role,
                winograd,
                layout: rule.layout.clone(),
                origin: format!("rule '{}'", rule.text),
            });
        }
    }
    let (role, winograd, origin) = match from_graph {
        Some(r) => r.map_err(&ambiguous)?,
        None => {
            let role = from_shape(name, shape, dtype).map_err(&ambiguous)?;
            (role, false, "shape".to_string())
        }
    };
    Ok(match rule {
        Some(rule) => Assignment {
            role,
            winograd,
            layout: rule.layout.clone(),
            origin: format!("{origin}, rule '{}'", rule.text),
        },
        None => Assignment {
            role,
            winograd,
            layout: None,
            origin,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_spellings_round_trip() {
        for s in [
            "conv",
            "depthwise",
            "depthwise:2",
            "grouped:4",
            "deconv",
            "deconv:2",
            "dense",
            "dense-io",
            "bias",
            "vector",
            "keep",
        ] {
            assert_eq!(Role::parse(s).map(|r| r.to_string()).as_deref(), Some(s));
        }
        assert_eq!(Role::parse("grouped"), None);
        assert_eq!(Role::parse("OIHW"), None);
        assert_eq!(Role::parse("depthwise:0"), None);
    }

    #[test]
    fn shapes_give_roles() {
        let f = ElementType::F32;
        assert_eq!(from_shape("a", &[8, 4, 3, 3], f), Ok(Role::Conv));
        assert!(from_shape("dw", &[8, 1, 3, 3], f)
            .unwrap_err()
            .contains("--rule 'dw=depthwise'"));
        assert_eq!(
            from_shape("fc", &[10, 4], f),
            Ok(Role::Dense { transposed: false })
        );
        assert_eq!(from_shape("wte.embed", &[10, 4], f), Ok(Role::Keep));
        assert_eq!(from_shape("fc.bias", &[10], f), Ok(Role::Bias));
        assert_eq!(from_shape("bn.weight", &[10], f), Ok(Role::Vector));
        assert_eq!(
            from_shape("ids", &[10, 4], ElementType::I64),
            Ok(Role::Keep)
        );
    }

    #[test]
    fn vector_lengths() {
        assert_eq!(vector_len(&[5]), Some(5));
        assert_eq!(vector_len(&[1, 5]), Some(5));
        assert_eq!(vector_len(&[5, 1, 1]), Some(5));
        assert_eq!(vector_len(&[1]), Some(1));
        assert_eq!(vector_len(&[]), None);
        assert_eq!(vector_len(&[2, 5]), None);
    }
}

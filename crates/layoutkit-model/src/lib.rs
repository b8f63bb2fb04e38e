//! # layoutkit-model
//!
//! A model's weights in the layouts an inference engine wants, and back.
//!
//! * Reading: ONNX models (initializers and Constant nodes, `raw_data`, typed fields and
//!   external data; [`Source`]), `.safetensors` files and sharded checkpoints
//!   (`*.safetensors.index.json`), memory-mapped.
//! * Roles ([`Role`]): a convolution filter, a depthwise or grouped filter, a transposed
//!   convolution filter, a dense weight, a bias, from the ONNX graph (Conv and its `group`,
//!   ConvTranspose, Gemm/MatMul and `transB`, the bias inputs) where there is one, else from
//!   [`Rule`]s and shapes.
//! * Profiles ([`Profile`]): the layout each engine wants per role (MACE's OpenCL images,
//!   oneDNN's blocked filters, cuDNN's OHWI, TensorRT's int8 NC/32HW32-style filters,
//!   layoutkit's CUDA convolution).
//! * Output: safetensors, every tensor stored as its physical array, its layout, canonical
//!   form, dims, element type, scale and source in the file's metadata ([`meta`]); written
//!   atomically. [`unpack_model`] restores the source tensors.
//!
//! This crate only chooses layouts: every conversion is `layoutkit-cpu`'s (the fast engine, or
//! the reference converter with [`Engine::Reference`]).
//!
//! ```no_run
//! use layoutkit_model::{pack_model, unpack_model, PackOptions, Profile, Rule, UnpackOptions};
//! let mut opts = PackOptions::new(Profile::OnednnAvx512);
//! opts.rules.push(Rule::parse("features.*.dw.weight=depthwise")?);
//! let report = pack_model("model.safetensors".as_ref(), "packed.safetensors".as_ref(), &opts)?;
//! for t in &report.shards[0].tensors {
//!     println!("{} {} {} -> {}", t.name, t.role, t.source_layout, t.target_layout);
//! }
//! unpack_model("packed.safetensors".as_ref(), "restored.safetensors".as_ref(), &UnpackOptions::default())?;
//! # Ok::<(), layoutkit_model::Error>(())
//! ```
#![deny(unsafe_code)]

mod dtype;
mod error;
mod exec;
mod jobs;
pub mod meta;
mod onnx;
mod pack;
pub mod plan;
mod profile;
mod roles;
mod rules;
pub mod safetensors;
mod sharded;
mod source;
mod unpack;

pub use dtype::ElementType;
pub use error::{Error, Result};
pub use exec::Engine;
pub use pack::{
    is_index, pack_model, pack_shard, plan_source, PackOptions, PackReport, Progress, ProgressFn,
    ShardReport, TensorRow,
};
pub use profile::Profile;
pub use roles::{Assignment, Role};
pub use rules::Rule;
pub use sharded::{write_packed_index, Index};
pub use source::{Source, SourceKind, SourceTensor};
pub use unpack::{unpack_file, unpack_model, UnpackOptions, UnpackReport};

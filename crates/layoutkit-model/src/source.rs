//! A model's tensors as read from disk: names, element types, shapes and where their bytes
//! are (a range of a memory-mapped file, or bytes decoded from a protobuf's typed fields).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::roles::GraphRole;
use crate::{ElementType, Error, Result};

/// Where a tensor's bytes are.
#[derive(Debug)]
pub(crate) enum Data {
    /// `range` of the mapped file number `file` of the [`Source`].
    Mapped { file: usize, range: Range<usize> },
    /// Decoded into memory (ONNX typed fields such as `int32_data` for fp16 weights).
    Owned(Vec<u8>),
}

/// One tensor of a model file.
#[derive(Debug)]
pub struct SourceTensor {
    /// The name in the file.
    pub name: String,
    /// Element type.
    pub dtype: ElementType,
    /// Shape as stored (row-major, C order).
    pub shape: Vec<usize>,
    pub(crate) data: Data,
}

impl SourceTensor {
    /// Number of elements (1 for a scalar).
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes of the stored tensor.
    pub fn bytes(&self) -> usize {
        self.elements() * self.dtype.size_bytes()
    }
}

/// A memory-mapped file (an empty file has no map).
#[derive(Debug)]
pub(crate) struct Mapped {
    pub map: Option<Mmap>,
}

impl Mapped {
    /// Maps `path` read-only.
    pub fn open(path: &Path) -> Result<Mapped> {
        let read_err = |source| Error::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let len = file.metadata().map_err(read_err)?.len();
        if len == 0 {
            return Ok(Mapped { map: None });
        }
        // SAFETY: the map is read-only and lives as long as the `Mapped`. If another process
        // truncates or rewrites the file while it is read, the bytes seen may change (or a read
        // past a truncated end faults): the documented caveat of mapping files.
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(&file) }.map_err(read_err)?;
        Ok(Mapped { map: Some(map) })
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Drops the pages of `range` from this process's resident set once a tensor is done (they
    /// stay in the page cache): the resident memory of a pack stays near the tensors in
    /// flight instead of growing to the whole model.
    pub fn release(&self, range: &Range<usize>) {
        let Some(map) = &self.map else { return };
        const PAGE: usize = 4096;
        let start = range.start / PAGE * PAGE;
        let end = range.end.min(map.len());
        if end <= start {
            return;
        }
        // SAFETY: the map is a read-only shared file mapping: MADV_DONTNEED only drops page
        // table entries, and a later read faults the same bytes back in from the file. No
        // slice of the map is written through.
        #[allow(unsafe_code)]
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// The kind of model file a [`Source`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// An ONNX model (weights from its initializers and Constant nodes).
    Onnx,
    /// One `.safetensors` file (or one shard of a checkpoint).
    SafeTensors,
}

/// The tensors of one model file (an ONNX model, or one safetensors file or shard), with the
/// roles its graph gives them where it has one.
#[derive(Debug)]
pub struct Source {
    /// The file read.
    pub path: PathBuf,
    /// What it is.
    pub kind: SourceKind,
    /// Tensors in file order.
    pub tensors: Vec<SourceTensor>,
    /// Key/value metadata of the file (safetensors `__metadata__`), kept in the output.
    pub metadata: Vec<(String, String)>,
    /// Roles from the ONNX graph, by tensor name (`None` for files without a graph).
    pub(crate) graph_roles: Option<HashMap<String, GraphRole>>,
    pub(crate) files: Vec<Mapped>,
}

impl Source {
    /// Opens a `.onnx` or `.safetensors` file (by its contents: safetensors files start with
    /// their header length, ONNX files are protobuf).
    pub fn open(path: &Path) -> Result<Source> {
        let is_onnx = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
        if is_onnx {
            crate::onnx::read(path)
        } else {
            crate::safetensors::read(path)
        }
    }

    /// The bytes of `tensor` (a tensor of this source).
    pub fn data<'a>(&'a self, tensor: &'a SourceTensor) -> &'a [u8] {
        match &tensor.data {
            Data::Mapped { file, range } => &self.files[*file].bytes()[range.clone()],
            Data::Owned(v) => v,
        }
    }

    /// Drops `tensor`'s pages from the resident set (see [`Mapped::release`]).
    pub(crate) fn release(&self, tensor: &SourceTensor) {
        if let Data::Mapped { file, range } = &tensor.data {
            self.files[*file].release(range);
        }
    }
}

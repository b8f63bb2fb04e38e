//! AutoTVM's itervar features (TVM `src/autotvm/touch_extractor.cc`), exactly: one row per
//! itervar (loop, thread binding or virtual thread) with its axis attributes, floating-point
//! arithmetic counts and, per buffer access in its scope, the touch pattern
//! `(stride, mod, count, reuse, T_count, T_reuse)`. See `autotvm-itervar-features.md`.
//!
//! Quirks of TVM are copied (section 9 of the spec), except where TVM crashes or reads
//! uninitialised memory; there we return an error or a defined value instead:
//! * floating arithmetic outside every loop is not counted (TVM: undefined behaviour);
//! * a `T_reuse` whose base reuse is 0 (only after zero-length loops) is 0 (TVM: division by
//!   zero);
//! * the same variable re-bound inside its own binding (only possible through the builder API)
//!   is an error (TVM: uninitialised memory);
//! * a `thread_extent` on a name other than `blockIdx.x|y|z`/`threadIdx.x|y|z`, or a
//!   non-constant thread or virtual-thread extent, is an error (TVM: fatal).
//!
//! The zero-length loop bug (the running top-down product stays 0 afterwards) is copied.

mod curve;
mod extract;
mod index;
mod output;
mod stdhash;

use std::collections::HashMap;

use crate::ir::DataType;

pub use curve::curve_sample;
pub use extract::extract;
pub use output::{flatten_f32, flatten_f64, flatten_names, row_values, take_log, RowValues, Value};
pub use stdhash::{libstdcxx_iteration_order, libstdcxx_string_hash};

/// TVM's `AnnotationType`, in its exact one-hot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Annotation {
    BlockX = 0,
    BlockY = 1,
    BlockZ = 2,
    ThreadX = 3,
    ThreadY = 4,
    ThreadZ = 5,
    Unrolled = 6,
    Vectorized = 7,
    Parallel = 8,
    Serial = 9,
    VirtualThread = 10,
}

/// Number of annotation kinds: the length of the one-hot.
pub const ANNOTATION_COUNT: usize = 11;

impl Annotation {
    /// Position in the one-hot.
    pub fn index(self) -> usize {
        self as usize
    }

    /// TVM's `ParallelLevel`: 2 for blocks, 1 for threads and parallel loops, 0 otherwise.
    pub fn parallel_level(self) -> u8 {
        match self {
            Annotation::BlockX | Annotation::BlockY | Annotation::BlockZ => 2,
            Annotation::ThreadX
            | Annotation::ThreadY
            | Annotation::ThreadZ
            | Annotation::Parallel => 1,
            _ => 0,
        }
    }

    /// The 11-entry one-hot.
    pub fn one_hot(self) -> [i64; ANNOTATION_COUNT] {
        let mut v = [0; ANNOTATION_COUNT];
        v[self.index()] = 1;
        v
    }
}

/// Extraction options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Element types of buffers not declared by an `allocate` in scope (default float32).
    pub buffer_types: HashMap<String, DataType>,
}

/// `buf[(stride * var) % mod + other]`: one itervar's view of one buffer access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TouchPattern {
    pub stride: i64,
    /// Never computed by TVM: always -1.
    pub modulo: i64,
    pub count: i64,
    pub reuse: i64,
    pub thread_count: i64,
    pub thread_reuse: i64,
}

impl TouchPattern {
    fn new(stride: i64) -> TouchPattern {
        TouchPattern {
            stride,
            modulo: -1,
            count: 1,
            reuse: 1,
            thread_count: 0,
            thread_reuse: 0,
        }
    }

    /// The six values in TVM's order.
    pub fn values(&self) -> [i64; 6] {
        [
            self.stride,
            self.modulo,
            self.count,
            self.reuse,
            self.thread_count,
            self.thread_reuse,
        ]
    }
}

/// One itervar's features.
#[derive(Clone, Debug, PartialEq)]
pub struct ItervarRow {
    /// The variable's name as written (several rows may share a name).
    pub name: String,
    /// The loop extent, or -1 when it is not an integer constant.
    pub length: i64,
    /// Depth on the itervar stack, 1 for the outermost.
    pub nest_level: i64,
    pub topdown: i64,
    pub bottomup: i64,
    pub ann: Annotation,
    /// Floating add/sub, mul, div/mod nodes directly under this itervar (static counts).
    pub arith: [i64; 3],
    /// Buffer accesses in scope: access number (see [`Features::key`]) and pattern, sorted
    /// byte-wise by key.
    pub touch: Vec<(u32, TouchPattern)>,
}

impl ItervarRow {
    /// `_attr_`: length, nest_level, topdown, bottomup, then the 11-entry one-hot.
    pub fn attr(&self) -> [i64; 15] {
        let mut a = [0i64; 15];
        a[0] = self.length;
        a[1] = self.nest_level;
        a[2] = self.topdown;
        a[3] = self.bottomup;
        a[4..].copy_from_slice(&self.ann.one_hot());
        a
    }
}

/// The extractor's output: rows in itervar order, and the access keys they refer to.
#[derive(Clone, Debug, PartialEq)]
pub struct Features {
    pub rows: Vec<ItervarRow>,
    /// Access keys by access number (`C_0`, `A.shared_3`, ...), concatenated; see
    /// [`Features::key`].
    pub(crate) key_text: String,
    pub(crate) key_ends: Vec<u32>,
}

impl Features {
    /// The key of an access number: the buffer name, `_`, and its per-name counter.
    pub fn key(&self, access: u32) -> &str {
        let end = self.key_ends[access as usize] as usize;
        let start = match access {
            0 => 0,
            a => self.key_ends[a as usize - 1] as usize,
        };
        &self.key_text[start..end]
    }

    /// Number of buffer accesses in the program (outside loops included).
    pub fn access_count(&self) -> usize {
        self.key_ends.len()
    }
}

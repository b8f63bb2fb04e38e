//! # layoutkit-loopir
//!
//! A small loop-nest IR (statements and expressions as in TVM's lowered TIR), its text form
//! (`loop-ir-text.md`: parser with `LINE:COL` errors, printer whose output parses back to the
//! same tree), and AutoTVM's itervar and curve-sample features, exactly as TVM's C++ extractor
//! computed them (see [`features`]).
//!
//! ```
//! use layoutkit_loopir::{parse, features::{extract, Options}};
//! let program = parse("
//! for (y, 0, 128) {
//!   for (x, 0, 128) {
//!     for (k, 0, 128) {
//!       C[((y*128) + x)] = (C[((y*128) + x)] + (A[((y*128) + k)]*B[((k*128) + x)]))
//!     }
//!   }
//! }").unwrap();
//! let rows = extract(&program, &Options::default()).unwrap().rows;
//! assert_eq!(rows[2].name, "k");
//! assert_eq!(rows[2].arith, [1, 1, 0]);
//! ```
#![forbid(unsafe_code)]

pub mod builder;
mod error;
pub mod features;
pub mod ir;
mod lexer;
mod parser;
mod printer;
pub mod random;

pub use error::Error;
pub use parser::parse;
pub use printer::print;

use ir::{Stmt, Var};

/// A parsed or built loop nest.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The statements.
    pub body: Stmt,
    /// Variables used but bound nowhere (symbolic sizes), by first use.
    pub free_vars: Vec<Var>,
    /// Number of variable identities handed out (ids are `0..var_count`).
    pub var_count: u32,
}

impl Program {
    /// Number of variable identities in the program (bound and free).
    pub fn var_count(&self) -> u32 {
        self.var_count
    }
}

//! Building programs in code: fresh variables and small constructors, so that tests and tools
//! can make IR without text.
//!
//! ```
//! use layoutkit_loopir::builder::Builder;
//! use layoutkit_loopir::ir::ForKind;
//! let mut b = Builder::new();
//! let x = b.var("x");
//! let body = b.store("C", b.v(&x), b.load("A", b.mul(b.v(&x), b.int(4))));
//! let program = b.finish(b.for_(&x, 8, ForKind::Serial, body));
//! assert_eq!(layoutkit_loopir::print(&program), "for (x, 0, 8) {\n  C[x] = A[x*4]\n}\n");
//! ```

use crate::ir::{BinOp, DataType, Expr, ForKind, Stmt, Var, VarId};
use crate::Program;

/// Hands out variables and assembles statements.
#[derive(Default)]
pub struct Builder {
    next_id: u32,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// A new variable (a new identity, whatever its name).
    pub fn var(&mut self, name: &str) -> Var {
        let v = Var {
            id: VarId(self.next_id),
            name: name.to_string(),
        };
        self.next_id += 1;
        v
    }

    pub fn v(&self, var: &Var) -> Expr {
        Expr::Var(var.clone())
    }

    pub fn int(&self, v: i64) -> Expr {
        Expr::Int(v)
    }

    pub fn f32(&self, v: f64) -> Expr {
        Expr::Float(v, DataType::FLOAT32)
    }

    pub fn bin(&self, op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary {
            op,
            a: Box::new(a),
            b: Box::new(b),
        }
    }

    pub fn add(&self, a: Expr, b: Expr) -> Expr {
        self.bin(BinOp::Add, a, b)
    }

    pub fn mul(&self, a: Expr, b: Expr) -> Expr {
        self.bin(BinOp::Mul, a, b)
    }

    pub fn load(&self, buffer: &str, index: Expr) -> Expr {
        Expr::Load {
            buffer: buffer.to_string(),
            index: Box::new(index),
        }
    }

    pub fn store(&self, buffer: &str, index: Expr, value: Expr) -> Stmt {
        Stmt::Store {
            buffer: buffer.to_string(),
            index,
            value,
        }
    }

    /// `for (var, 0, extent)` of the given kind.
    pub fn for_(&self, var: &Var, extent: i64, kind: ForKind, body: Stmt) -> Stmt {
        Stmt::For {
            var: var.clone(),
            min: Expr::Int(0),
            extent: Expr::Int(extent),
            kind,
            body: Box::new(body),
        }
    }

    /// A `thread_extent` binding (the variable's name must be blockIdx.* or threadIdx.*).
    pub fn thread(&self, var: &Var, extent: i64, body: Stmt) -> Stmt {
        Stmt::ThreadExtent {
            var: var.clone(),
            extent: Expr::Int(extent),
            body: Box::new(body),
        }
    }

    /// A `virtual_thread` binding.
    pub fn vthread(&self, var: &Var, extent: i64, body: Stmt) -> Stmt {
        Stmt::VirtualThread {
            var: var.clone(),
            extent: Expr::Int(extent),
            body: Box::new(body),
        }
    }

    pub fn seq(&self, items: Vec<Stmt>) -> Stmt {
        Stmt::Seq(items)
    }

    /// The program, with the variable count handed out so far.
    pub fn finish(&self, body: Stmt) -> Program {
        Program {
            body,
            free_vars: Vec::new(),
            var_count: self.next_id,
        }
    }
}

//! The loop-nest IR: statements and expressions as in TVM's lowered TIR (after `ana_lower`),
//! with one flattened index per memory access.
//!
//! Variables are identified by their binding ([`VarId`]), never by their name: two loops named
//! `x` are two variables. A [`Var`] that no loop, attr or let binds is a free symbolic variable.

use std::fmt;

/// Element type of an expression: a scalar kind and a lane count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataType {
    pub kind: ScalarKind,
    pub bits: u8,
    pub lanes: u16,
}

/// Scalar kinds of [`DataType`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    Int,
    UInt,
    Float,
    BFloat,
    Bool,
}

impl DataType {
    pub const INT32: DataType = DataType::scalar(ScalarKind::Int, 32);
    pub const FLOAT32: DataType = DataType::scalar(ScalarKind::Float, 32);
    pub const FLOAT16: DataType = DataType::scalar(ScalarKind::Float, 16);
    pub const FLOAT64: DataType = DataType::scalar(ScalarKind::Float, 64);
    pub const BFLOAT16: DataType = DataType::scalar(ScalarKind::BFloat, 16);
    pub const BOOL: DataType = DataType::scalar(ScalarKind::Bool, 1);

    /// A one-lane type.
    pub const fn scalar(kind: ScalarKind, bits: u8) -> DataType {
        DataType {
            kind,
            bits,
            lanes: 1,
        }
    }

    /// The same type with `lanes` lanes.
    pub fn with_lanes(self, lanes: u16) -> DataType {
        DataType { lanes, ..self }
    }

    /// Whether arithmetic on this type is counted as floating point: float16/32/64 and bfloat16,
    /// any number of lanes (TVM >= 0.9).
    pub fn is_floating(self) -> bool {
        matches!(self.kind, ScalarKind::Float | ScalarKind::BFloat)
    }

    /// Parses `float32`, `int32`, `float16x4`, `bfloat16`, `bool`, ...
    pub fn parse(name: &str) -> Option<DataType> {
        let (base, lanes) = match name.rfind('x') {
            Some(i)
                if i > 0
                    && name[i + 1..].chars().all(|c| c.is_ascii_digit())
                    && i + 1 < name.len() =>
            {
                (&name[..i], name[i + 1..].parse::<u16>().ok()?)
            }
            _ => (name, 1),
        };
        let t = match base {
            "bool" => DataType::BOOL,
            "bfloat16" => DataType::BFLOAT16,
            _ => {
                let (kind, digits) = if let Some(d) = base.strip_prefix("uint") {
                    (ScalarKind::UInt, d)
                } else if let Some(d) = base.strip_prefix("int") {
                    (ScalarKind::Int, d)
                } else if let Some(d) = base.strip_prefix("float") {
                    (ScalarKind::Float, d)
                } else {
                    return None;
                };
                let bits: u8 = digits.parse().ok()?;
                let ok = match kind {
                    ScalarKind::Float => matches!(bits, 16 | 32 | 64),
                    _ => matches!(bits, 8 | 16 | 32 | 64),
                };
                if !ok {
                    return None;
                }
                DataType::scalar(kind, bits)
            }
        };
        (lanes >= 1).then_some(t.with_lanes(lanes))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ScalarKind::Int => write!(f, "int{}", self.bits)?,
            ScalarKind::UInt => write!(f, "uint{}", self.bits)?,
            ScalarKind::Float => write!(f, "float{}", self.bits)?,
            ScalarKind::BFloat => write!(f, "bfloat16")?,
            ScalarKind::Bool => write!(f, "bool")?,
        }
        if self.lanes > 1 {
            write!(f, "x{}", self.lanes)?;
        }
        Ok(())
    }
}

/// Identity of a variable binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// A variable: its binding identity and its name (names may repeat).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Var {
    pub id: VarId,
    pub name: String,
}

/// Binary operators. `Div` and `Mod` are TVM's truncating `tir.Div`/`tir.Mod`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// The operator as written in the text form.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// C precedence level (higher binds tighter).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne => 3,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Mod => 6,
        }
    }

    /// Whether the result is a boolean.
    pub fn is_logical(self) -> bool {
        self.precedence() <= 4
    }
}

/// Expressions.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// An int32 literal.
    Int(i64),
    /// A float literal of a float type.
    Float(f64, DataType),
    Var(Var),
    /// A load of one element (or a vector, with a ramp index) of a named buffer.
    Load {
        buffer: String,
        index: Box<Expr>,
    },
    Binary {
        op: BinOp,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    Not(Box<Expr>),
    /// Intrinsic or extern calls: `floordiv`, `floormod`, `min`, `max`, `select`, `exp`, ...
    Call {
        name: String,
        args: Vec<Expr>,
    },
    Cast {
        dtype: DataType,
        value: Box<Expr>,
    },
    Ramp {
        base: Box<Expr>,
        stride: Box<Expr>,
        lanes: u16,
    },
    Broadcast {
        value: Box<Expr>,
        lanes: u16,
    },
}

/// Loop kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ForKind {
    Serial,
    Parallel,
    Unrolled,
    Vectorized,
}

impl ForKind {
    /// The keyword of the text form.
    pub fn keyword(self) -> &'static str {
        match self {
            ForKind::Serial => "for",
            ForKind::Parallel => "parallel",
            ForKind::Unrolled => "unrolled",
            ForKind::Vectorized => "vectorized",
        }
    }
}

/// Statements.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Seq(Vec<Stmt>),
    /// `produce NAME { body }`: no itervar, just its body.
    Produce {
        name: String,
        body: Box<Stmt>,
    },
    For {
        var: Var,
        min: Expr,
        extent: Expr,
        kind: ForKind,
        body: Box<Stmt>,
    },
    /// `thread_extent` binding of a thread variable over `body`.
    ThreadExtent {
        var: Var,
        extent: Expr,
        body: Box<Stmt>,
    },
    /// `virtual_thread` binding over `body`.
    VirtualThread {
        var: Var,
        extent: Expr,
        body: Box<Stmt>,
    },
    /// Any other attr (storage_scope, pragma, ...): transparent. `text` is what followed
    /// `// attr ` on its line, kept for printing.
    Attr {
        text: String,
        body: Box<Stmt>,
    },
    Allocate {
        buffer: String,
        dtype: DataType,
        extents: Vec<Expr>,
        body: Box<Stmt>,
    },
    Store {
        buffer: String,
        index: Expr,
        value: Expr,
    },
    Let {
        var: Var,
        value: Expr,
        body: Box<Stmt>,
    },
    If {
        cond: Expr,
        then: Box<Stmt>,
        otherwise: Option<Box<Stmt>>,
    },
    Evaluate(Expr),
}

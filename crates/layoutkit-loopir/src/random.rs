//! Random loop nests for property tests, fuzzing and benchmarks: every statement and expression
//! kind, shadowed names, thread bindings, symbolic extents. Deterministic in the seed.

use crate::ir::{BinOp, DataType, Expr, ForKind, Stmt, Var, VarId};
use crate::Program;

/// A random program from `seed`, at most `max_depth` statements deep.
///
/// Contract: every variable reference resolves to the innermost binding of its name, so the
/// program prints and parses back to the same features.
pub fn random_program(seed: u64, max_depth: usize) -> Program {
    let mut g = Gen {
        state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        next_id: 0,
        free: Vec::new(),
    };
    let body = g.block(0, max_depth, &mut Vec::new());
    let var_count = g.next_id;
    Program {
        body,
        free_vars: g.free,
        var_count,
    }
}

const NAMES: [&str; 5] = ["x", "y", "z", "i", "k.outer"];
const BUFFERS: [&str; 6] = ["A", "B", "C", "A.shared", "data_vec", "C.local"];
const THREADS: [&str; 6] = [
    "blockIdx.x",
    "blockIdx.y",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "blockIdx.z",
];

struct Gen {
    state: u64,
    next_id: u32,
    free: Vec<Var>,
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn var(&mut self, name: &str) -> Var {
        let v = Var {
            id: VarId(self.next_id),
            name: name.to_string(),
        };
        self.next_id += 1;
        v
    }

    fn free_var(&mut self, name: &str) -> Var {
        if let Some(v) = self.free.iter().find(|v| v.name == name) {
            return v.clone();
        }
        let v = self.var(name);
        self.free.push(v.clone());
        v
    }

    /// A variable in scope (the innermost binding of a name), or the free symbol `n`.
    fn pick_var(&mut self, scope: &[Var]) -> Expr {
        if scope.is_empty() || self.below(8) == 0 {
            return Expr::Var(self.free_var("n"));
        }
        let v = &scope[self.below(scope.len() as u64) as usize];
        let innermost = scope.iter().rev().find(|w| w.name == v.name).unwrap_or(v);
        Expr::Var(innermost.clone())
    }

    fn block(&mut self, depth: usize, max_depth: usize, scope: &mut Vec<Var>) -> Stmt {
        let n = 1 + self.below(3) as usize;
        let mut items: Vec<Stmt> = (0..n).map(|_| self.stmt(depth, max_depth, scope)).collect();
        if items.len() == 1 {
            items.pop().unwrap_or(Stmt::Seq(Vec::new()))
        } else {
            Stmt::Seq(items)
        }
    }

    fn stmt(&mut self, depth: usize, max_depth: usize, scope: &mut Vec<Var>) -> Stmt {
        let leaf = depth >= max_depth;
        let choice = if leaf {
            7 + self.below(3)
        } else {
            self.below(10)
        };
        match choice {
            0..=2 => {
                let kind = [
                    ForKind::Serial,
                    ForKind::Parallel,
                    ForKind::Unrolled,
                    ForKind::Vectorized,
                ][self.below(4) as usize];
                let name = NAMES[self.below(NAMES.len() as u64) as usize];
                let extent = if self.below(10) == 0 {
                    self.pick_var(scope)
                } else {
                    Expr::Int(self.below(9) as i64)
                };
                let var = self.var(name);
                scope.push(var.clone());
                let body = self.block(depth + 1, max_depth, scope);
                scope.pop();
                Stmt::For {
                    var,
                    min: Expr::Int(0),
                    extent,
                    kind,
                    body: Box::new(body),
                }
            }
            3 | 4 => {
                let virtual_thread = self.below(3) == 0;
                let name = if virtual_thread {
                    "vthread"
                } else {
                    THREADS[self.below(THREADS.len() as u64) as usize]
                };
                let var = self.var(name);
                let extent = Expr::Int(1 + self.below(8) as i64);
                scope.push(var.clone());
                let body = Box::new(self.block(depth + 1, max_depth, scope));
                scope.pop();
                if virtual_thread {
                    Stmt::VirtualThread { var, extent, body }
                } else {
                    Stmt::ThreadExtent { var, extent, body }
                }
            }
            5 => {
                let value = self.index(scope, 2);
                let name = NAMES[self.below(NAMES.len() as u64) as usize];
                let var = self.var(name);
                scope.push(var.clone());
                let body = Box::new(self.block(depth + 1, max_depth, scope));
                scope.pop();
                Stmt::Let { var, value, body }
            }
            6 => {
                let buffer = BUFFERS[self.below(BUFFERS.len() as u64) as usize].to_string();
                let dtype =
                    [DataType::FLOAT16, DataType::FLOAT32, DataType::INT32][self.below(3) as usize];
                let body = Box::new(self.block(depth + 1, max_depth, scope));
                match self.below(3) {
                    0 => Stmt::Allocate {
                        buffer,
                        dtype,
                        extents: vec![Expr::Int(64)],
                        body,
                    },
                    1 => Stmt::If {
                        cond: Expr::Binary {
                            op: BinOp::Lt,
                            a: Box::new(self.index(scope, 1)),
                            b: Box::new(Expr::Int(10)),
                        },
                        then: body,
                        otherwise: (self.below(2) == 0)
                            .then(|| Box::new(self.block(depth + 1, max_depth, scope))),
                    },
                    _ => Stmt::Produce { name: buffer, body },
                }
            }
            7 | 8 => Stmt::Store {
                buffer: BUFFERS[self.below(BUFFERS.len() as u64) as usize].to_string(),
                index: self.index(scope, 3),
                value: self.value(scope, 3),
            },
            _ => Stmt::Evaluate(self.value(scope, 2)),
        }
    }

    fn index(&mut self, scope: &[Var], depth: usize) -> Expr {
        if depth == 0 {
            return if self.below(3) == 0 {
                Expr::Int(self.below(64) as i64 - 8)
            } else {
                self.pick_var(scope)
            };
        }
        let sub = |g: &mut Gen| g.index(scope, depth - 1);
        match self.below(9) {
            0 | 1 => {
                let v = self.pick_var(scope);
                Expr::Binary {
                    op: BinOp::Mul,
                    a: Box::new(v),
                    b: Box::new(Expr::Int(self.below(300) as i64 - 20)),
                }
            }
            2 | 3 => Expr::Binary {
                op: BinOp::Add,
                a: Box::new(sub(self)),
                b: Box::new(sub(self)),
            },
            4 => Expr::Binary {
                op: [BinOp::Sub, BinOp::Div, BinOp::Mod, BinOp::Mul][self.below(4) as usize],
                a: Box::new(sub(self)),
                b: Box::new(sub(self)),
            },
            5 => Expr::Call {
                name: ["floordiv", "floormod", "min", "max"][self.below(4) as usize].to_string(),
                args: vec![sub(self), Expr::Int(1 + self.below(16) as i64)],
            },
            6 => Expr::Load {
                buffer: "idx".to_string(),
                index: Box::new(sub(self)),
            },
            7 => Expr::Ramp {
                base: Box::new(sub(self)),
                stride: Box::new(Expr::Int(1)),
                lanes: 4,
            },
            _ => sub(self),
        }
    }

    fn value(&mut self, scope: &[Var], depth: usize) -> Expr {
        if depth == 0 {
            return match self.below(3) {
                0 => Expr::Float(
                    self.below(40) as f64 / 4.0 - 2.0,
                    [DataType::FLOAT32, DataType::FLOAT16, DataType::FLOAT64]
                        [self.below(3) as usize],
                ),
                _ => Expr::Load {
                    buffer: BUFFERS[self.below(BUFFERS.len() as u64) as usize].to_string(),
                    index: Box::new(self.index(scope, 2)),
                },
            };
        }
        let sub = |g: &mut Gen| g.value(scope, depth - 1);
        match self.below(8) {
            0..=2 => Expr::Binary {
                op: [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Mod]
                    [self.below(5) as usize],
                a: Box::new(sub(self)),
                b: Box::new(sub(self)),
            },
            3 => Expr::Call {
                name: ["exp", "max", "select", "floordiv"][self.below(4) as usize].to_string(),
                args: vec![sub(self), sub(self)],
            },
            4 => Expr::Cast {
                dtype: DataType::FLOAT32,
                value: Box::new(self.index(scope, 1)),
            },
            5 => Expr::Broadcast {
                value: Box::new(sub(self)),
                lanes: 4,
            },
            6 => Expr::Not(Box::new(Expr::Binary {
                op: BinOp::Ge,
                a: Box::new(sub(self)),
                b: Box::new(sub(self)),
            })),
            _ => sub(self),
        }
    }
}

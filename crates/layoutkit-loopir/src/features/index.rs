//! TVM's `IndexParser`: the stride of each variable in a flattened index (spec section 4.4),
//! quirks included.

use crate::ir::{BinOp, Expr, VarId};

/// Variable -> stride, in first-visit order. Small: a linear map.
#[derive(Default)]
pub(crate) struct IndexPattern {
    pub(crate) strides: Vec<(VarId, i64)>,
    next_stride: i64,
}

impl IndexPattern {
    /// Parses `index`: a variable gets the pending stride (1 unless the innermost `var * const`
    /// just set it) the first time it is seen; only `Mul(Var, IntImm)` sets a stride.
    pub(crate) fn parse(&mut self, index: &Expr) {
        self.strides.clear();
        self.next_stride = 1;
        self.visit(index);
    }

    pub(crate) fn stride_of(&self, var: VarId) -> i64 {
        self.strides
            .iter()
            .find(|(v, _)| *v == var)
            .map_or(0, |&(_, s)| s)
    }

    fn visit(&mut self, e: &Expr) {
        match e {
            Expr::Var(v) => {
                if !self.strides.iter().any(|(id, _)| *id == v.id) {
                    self.strides.push((v.id, self.next_stride));
                    self.next_stride = 1;
                }
            }
            Expr::Binary { op, a, b } => {
                if let (BinOp::Mul, Expr::Var(_), Expr::Int(k)) = (op, &**a, &**b) {
                    self.next_stride = *k;
                }
                self.visit(a);
                self.visit(b);
            }
            Expr::Not(a) => self.visit(a),
            Expr::Load { index, .. } => self.visit(index),
            Expr::Call { args, .. } => args.iter().for_each(|a| self.visit(a)),
            Expr::Cast { value, .. } | Expr::Broadcast { value, .. } => self.visit(value),
            Expr::Ramp { base, stride, .. } => {
                self.visit(base);
                self.visit(stride);
            }
            Expr::Int(_) | Expr::Float(..) => {}
        }
    }
}

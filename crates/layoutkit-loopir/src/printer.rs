//! [`Program`] -> text that [`crate::parse`] reads back to the same tree.

use std::fmt::Write;

use crate::ir::{BinOp, DataType, Expr, ScalarKind, Stmt};
use crate::Program;

/// Prints a program in the text form: TVM's statement syntax with two-space indentation;
/// expressions with only the parentheses C precedence needs (`((x*128) + y)` prints as
/// `x*128 + y`, the same tree).
///
/// Contract: for programs whose variable references all resolve to the innermost binding of
/// their name (always true of parsed programs), `parse(&print(p))` has the same tree up to
/// variable ids, so the same features. Scoped statements (attr, let, allocate) that are not
/// the last of their sequence are wrapped in a `{ ... }` block so that their scope ends there.
///
/// ```
/// let text = "for (x, 0, 8) {\n  C[x*4 + 1] = A[x]*(B[x] + 1.0f)\n}\n";
/// let p = layoutkit_loopir::parse(text).unwrap();
/// assert_eq!(layoutkit_loopir::print(&p), text);
/// ```
pub fn print(program: &Program) -> String {
    let mut out = String::new();
    stmt(&mut out, &program.body, 0);
    out
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn is_scoped(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::ThreadExtent { .. }
            | Stmt::VirtualThread { .. }
            | Stmt::Attr { .. }
            | Stmt::Allocate { .. }
            | Stmt::Let { .. }
    )
}

fn stmt(out: &mut String, s: &Stmt, level: usize) {
    match s {
        Stmt::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                if is_scoped(item) && i + 1 < items.len() {
                    indent(out, level);
                    out.push_str("{\n");
                    stmt(out, item, level + 1);
                    indent(out, level);
                    out.push_str("}\n");
                } else {
                    stmt(out, item, level);
                }
            }
        }
        Stmt::Produce { name, body } => block(out, &format!("produce {name}"), body, level),
        Stmt::For {
            var,
            min,
            extent,
            kind,
            body,
        } => {
            let head = format!(
                "{} ({}, {}, {})",
                kind.keyword(),
                var.name,
                expr_string(min),
                expr_string(extent)
            );
            block(out, &head, body, level);
        }
        Stmt::ThreadExtent { var, extent, body } | Stmt::VirtualThread { var, extent, body } => {
            let key = if matches!(s, Stmt::ThreadExtent { .. }) {
                "thread_extent"
            } else {
                "virtual_thread"
            };
            let e = expr_string(extent);
            indent(out, level);
            let _ = writeln!(
                out,
                "// attr [iter_var({}, range(min=0, ext={e}), {})] {key} = {e}",
                var.name, var.name
            );
            stmt(out, body, level);
        }
        Stmt::Attr { text, body } => {
            indent(out, level);
            let _ = writeln!(out, "// attr {text}");
            stmt(out, body, level);
        }
        Stmt::Allocate {
            buffer,
            dtype,
            extents,
            body,
        } => {
            indent(out, level);
            let _ = write!(out, "allocate {buffer}[{dtype}");
            for e in extents {
                let _ = write!(out, " * {}", expr_string(e));
            }
            out.push_str("]\n");
            stmt(out, body, level);
        }
        Stmt::Store {
            buffer,
            index,
            value,
        } => {
            indent(out, level);
            let _ = writeln!(
                out,
                "{buffer}[{}] = {}",
                expr_string(index),
                expr_string(value)
            );
        }
        Stmt::Let { var, value, body } => {
            indent(out, level);
            let _ = writeln!(out, "let {} = {}", var.name, expr_string(value));
            stmt(out, body, level);
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => {
            indent(out, level);
            let _ = writeln!(out, "if ({}) {{", expr_string(cond));
            stmt(out, then, level + 1);
            indent(out, level);
            match otherwise {
                Some(e) => {
                    out.push_str("} else {\n");
                    stmt(out, e, level + 1);
                    indent(out, level);
                    out.push_str("}\n");
                }
                None => out.push_str("}\n"),
            }
        }
        Stmt::Evaluate(e) => {
            indent(out, level);
            let _ = writeln!(out, "evaluate({})", expr_string(e));
        }
    }
}

fn block(out: &mut String, head: &str, body: &Stmt, level: usize) {
    indent(out, level);
    let _ = writeln!(out, "{head} {{");
    stmt(out, body, level + 1);
    indent(out, level);
    out.push_str("}\n");
}

/// One expression in the text form.
pub fn expr_string(e: &Expr) -> String {
    let mut s = String::new();
    expr(&mut s, e);
    s
}

fn expr(out: &mut String, e: &Expr) {
    match e {
        Expr::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Expr::Float(v, t) => float_literal(out, *v, *t),
        Expr::Var(v) => out.push_str(&v.name),
        Expr::Load { buffer, index } => {
            out.push_str(buffer);
            out.push('[');
            expr(out, index);
            out.push(']');
        }
        Expr::Binary { op, a, b } => {
            // Parentheses only where the tree needs them (left-associative C precedence), so
            // the text never nests deeper than the parser allows for the tree. `*` and `/`
            // print tight, every other operator spaced, as TVM prints them.
            let p = op.precedence();
            let paren_left = matches!(**a, Expr::Binary { op: o, .. } if o.precedence() < p);
            let paren_right = matches!(**b, Expr::Binary { op: o, .. } if o.precedence() <= p);
            wrapped(out, a, paren_left);
            if matches!(op, BinOp::Mul | BinOp::Div) {
                out.push_str(op.symbol());
            } else {
                let _ = write!(out, " {} ", op.symbol());
            }
            wrapped(out, b, paren_right);
        }
        Expr::Not(a) => {
            // `!` binds tighter than every binary operator.
            out.push('!');
            wrapped(out, a, matches!(**a, Expr::Binary { .. }));
        }
        Expr::Call { name, args } => {
            out.push_str(name);
            list(out, args);
        }
        Expr::Cast { dtype, value } => {
            let _ = write!(out, "{dtype}(");
            expr(out, value);
            out.push(')');
        }
        Expr::Ramp {
            base,
            stride,
            lanes,
        } => {
            out.push_str("ramp(");
            expr(out, base);
            out.push_str(", ");
            expr(out, stride);
            let _ = write!(out, ", {lanes})");
        }
        Expr::Broadcast { value, lanes } => {
            let _ = write!(out, "x{lanes}(");
            expr(out, value);
            out.push(')');
        }
    }
}

fn wrapped(out: &mut String, e: &Expr, paren: bool) {
    if paren {
        out.push('(');
    }
    expr(out, e);
    if paren {
        out.push(')');
    }
}

fn list(out: &mut String, args: &[Expr]) {
    out.push('(');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        expr(out, a);
    }
    out.push(')');
}

fn float_literal(out: &mut String, v: f64, t: DataType) {
    let suffix = match (t.kind, t.bits) {
        (ScalarKind::Float, 16) => 'h',
        (ScalarKind::Float, 64) => 'd',
        _ => 'f',
    };
    // `{:?}` is the shortest text that reads back to the same f64, always with a `.` or `e`.
    let _ = write!(out, "{v:?}{suffix}");
}

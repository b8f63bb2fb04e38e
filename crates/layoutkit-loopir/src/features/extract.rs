//! The traversal of spec section 4: enter/exit of itervars, memory accesses, arithmetic.

use super::index::IndexPattern;
use super::{Annotation, Features, ItervarRow, Options, TouchPattern};
use crate::ir::{BinOp, DataType, Expr, ForKind, Stmt, VarId};

const NONE: u32 = u32::MAX;

/// Access keys (`C_0`, `A.shared_3`, ...) in one string, to avoid an allocation per access.
struct Keys {
    text: String,
    ends: Vec<u32>,
}

impl Keys {
    fn push(&mut self, buffer: &str, n: u32) {
        use std::fmt::Write;
        self.text.push_str(buffer);
        let _ = write!(self.text, "_{n}");
        self.ends.push(self.text.len() as u32);
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: u32) -> &str {
        let end = self.ends[i as usize] as usize;
        let start = if i == 0 {
            0
        } else {
            self.ends[i as usize - 1] as usize
        };
        &self.text[start..end]
    }
}
use crate::parser::thread_ann;
use crate::{Error, Program};

/// Extracts the itervar features of `program`.
///
/// ```
/// let p = layoutkit_loopir::parse("for (x, 0, 8) {\n  C[x] = A[(x*4)]\n}").unwrap();
/// let f = layoutkit_loopir::features::extract(&p, &Default::default()).unwrap();
/// let (access, pattern) = f.rows[0].touch[0];
/// assert_eq!(f.key(access), "A_0");
/// assert_eq!(pattern.stride, 4);
/// ```
pub fn extract(program: &Program, options: &Options) -> Result<Features, Error> {
    let mut x = Extractor {
        options,
        records: Vec::with_capacity(program.var_count as usize),
        seen: vec![NONE; program.var_count as usize],
        stack: Vec::with_capacity(16),
        skip: Vec::new(),
        topdown: 1,
        buffer_counter: Vec::new(),
        keys: Keys {
            text: String::with_capacity(256),
            ends: Vec::with_capacity(32),
        },
        allocated: Vec::new(),
        let_types: Vec::new(),
        index: IndexPattern::default(),
    };
    x.stmt(&program.body)?;
    Ok(x.finish())
}

/// One itervar occurrence while extracting. Its accesses are the contiguous range
/// `first_access .. first_access + touch.len()` (everything between its enter and exit).
struct Record {
    var: VarId,
    name: String,
    length: i64,
    nest_level: i64,
    ann: Annotation,
    topdown: i64,
    bottomup: i64,
    arith: [i64; 3],
    first_access: usize,
    /// (access number, pattern), in access order.
    touch: Vec<(u32, TouchPattern)>,
}

struct Extractor<'a, 'p> {
    options: &'a Options,
    /// In entry order, which is the output order.
    records: Vec<Record>,
    /// Variable id -> its live record (every variable ever entered), or NONE.
    seen: Vec<u32>,
    /// Open records, outermost first.
    stack: Vec<usize>,
    /// Stack depths of skipped duplicate virtual threads.
    skip: Vec<usize>,
    topdown: i64,
    /// Next access number per buffer name (few distinct names: a linear map).
    buffer_counter: Vec<(&'p str, u32)>,
    keys: Keys,
    /// `allocate` scopes: buffer -> element type, innermost last.
    allocated: Vec<(String, DataType)>,
    /// Variable id -> type of a let-bound variable.
    let_types: Vec<Option<DataType>>,
    index: IndexPattern,
}

impl<'p> Extractor<'_, 'p> {
    fn stmt(&mut self, s: &'p Stmt) -> Result<(), Error> {
        match s {
            Stmt::Seq(items) => {
                for item in items {
                    self.stmt(item)?;
                }
            }
            Stmt::Produce { body, .. } | Stmt::Attr { body, .. } => self.stmt(body)?,
            Stmt::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                let ann = match kind {
                    ForKind::Serial => Annotation::Serial,
                    ForKind::Parallel => Annotation::Parallel,
                    ForKind::Unrolled => Annotation::Unrolled,
                    ForKind::Vectorized => Annotation::Vectorized,
                };
                let length = match extent {
                    Expr::Int(n) => *n,
                    _ => -1,
                };
                self.enter(var.id, &var.name, length, ann)?;
                self.expr(min);
                self.expr(extent);
                self.stmt(body)?;
                self.exit();
            }
            Stmt::ThreadExtent { var, extent, body }
            | Stmt::VirtualThread { var, extent, body } => {
                let vthread = matches!(s, Stmt::VirtualThread { .. });
                let ann = if vthread {
                    Annotation::VirtualThread
                } else {
                    thread_ann(&var.name).ok_or_else(|| {
                        Error::Invalid(format!(
                            "invalid thread itervar `{}`: a thread_extent binds blockIdx.x|y|z or threadIdx.x|y|z",
                            var.name
                        ))
                    })?
                };
                let Expr::Int(length) = *extent else {
                    return Err(Error::Invalid(format!(
                        "the extent of thread itervar `{}` must be an integer constant",
                        var.name
                    )));
                };
                self.enter(var.id, &var.name, length, ann)?;
                self.expr(extent);
                self.stmt(body)?;
                self.exit();
            }
            Stmt::Allocate {
                buffer,
                dtype,
                extents,
                body,
            } => {
                for e in extents {
                    self.expr(e);
                }
                self.allocated.push((buffer.clone(), *dtype));
                let r = self.stmt(body);
                self.allocated.pop();
                r?;
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                // The store is numbered before the loads of its value.
                self.mem(buffer, index);
                self.expr(value);
                self.expr(index);
            }
            Stmt::Let { var, value, body } => {
                let t = self.expr(value);
                let i = var.id.0 as usize;
                if self.let_types.len() <= i {
                    self.let_types.resize(i + 1, None);
                }
                self.let_types[i] = Some(t);
                self.stmt(body)?;
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond);
                self.stmt(then)?;
                if let Some(o) = otherwise {
                    self.stmt(o)?;
                }
            }
            Stmt::Evaluate(e) => {
                self.expr(e);
            }
        }
        Ok(())
    }

    /// Visits an expression (TVM's order) and returns its type.
    fn expr(&mut self, e: &'p Expr) -> DataType {
        match e {
            Expr::Int(_) => DataType::INT32,
            Expr::Float(_, t) => *t,
            Expr::Var(v) => self
                .let_types
                .get(v.id.0 as usize)
                .copied()
                .flatten()
                .unwrap_or(DataType::INT32),
            Expr::Load { buffer, index } => {
                self.mem(buffer, index);
                let it = self.expr(index);
                self.buffer_type(buffer).with_lanes(it.lanes)
            }
            Expr::Binary { op, a, b } => {
                let ta = self.expr(a);
                let tb = self.expr(b);
                if op.is_logical() {
                    return DataType::BOOL.with_lanes(ta.lanes.max(tb.lanes));
                }
                let t = if ta.is_floating() || !tb.is_floating() {
                    ta
                } else {
                    tb
                };
                if t.is_floating() {
                    let slot = match op {
                        BinOp::Add | BinOp::Sub => 0,
                        BinOp::Mul => 1,
                        _ => 2,
                    };
                    // TVM reads the top of an empty stack here (undefined); we skip.
                    if let Some(&top) = self.stack.last() {
                        self.records[top].arith[slot] += 1;
                    }
                }
                t
            }
            Expr::Not(a) => {
                let t = self.expr(a);
                DataType::BOOL.with_lanes(t.lanes)
            }
            Expr::Call { name, args } => {
                let types: Vec<DataType> = args.iter().map(|a| self.expr(a)).collect();
                match (name.as_str(), types.as_slice()) {
                    ("select", [_, t, ..]) => *t,
                    ("min" | "max" | "floordiv" | "floormod", [a, b, ..]) => {
                        if a.is_floating() || !b.is_floating() {
                            *a
                        } else {
                            *b
                        }
                    }
                    (_, [t, ..]) => *t,
                    (_, []) => DataType::INT32,
                }
            }
            Expr::Cast { dtype, value } => {
                self.expr(value);
                *dtype
            }
            Expr::Ramp {
                base,
                stride,
                lanes,
            } => {
                let t = self.expr(base);
                self.expr(stride);
                t.with_lanes(*lanes)
            }
            Expr::Broadcast { value, lanes } => self.expr(value).with_lanes(*lanes),
        }
    }

    fn buffer_type(&self, buffer: &str) -> DataType {
        self.allocated
            .iter()
            .rev()
            .find(|(b, _)| b == buffer)
            .map(|&(_, t)| t)
            .or_else(|| self.options.buffer_types.get(buffer).copied())
            .unwrap_or(DataType::FLOAT32)
    }

    fn enter(&mut self, var: VarId, name: &str, length: i64, ann: Annotation) -> Result<(), Error> {
        let slot = var.0 as usize;
        if self.seen.len() <= slot {
            self.seen.resize(slot + 1, NONE);
        }
        if ann == Annotation::VirtualThread && self.seen[slot] != NONE {
            self.skip.push(self.stack.len());
            return Ok(());
        }
        if self.stack.iter().any(|&r| self.records[r].var == var) {
            return Err(Error::Invalid(format!(
                "itervar `{name}` is bound again inside its own binding (TVM reads uninitialised memory here)"
            )));
        }
        self.topdown = self.topdown.wrapping_mul(length);
        let idx = self.records.len();
        // A variable entered again gets a fresh record; the old one stays as a frozen row.
        self.seen[slot] = idx as u32;
        self.records.push(Record {
            var,
            name: name.to_string(),
            length,
            nest_level: self.stack.len() as i64 + 1,
            ann,
            topdown: self.topdown,
            bottomup: -1,
            arith: [0; 3],
            first_access: self.keys.len(),
            touch: Vec::new(),
        });
        self.stack.push(idx);
        Ok(())
    }

    fn mem(&mut self, buffer: &'p str, index: &Expr) {
        let n = match self.buffer_counter.iter_mut().find(|(b, _)| *b == buffer) {
            Some((_, n)) => n,
            None => {
                self.buffer_counter.push((buffer, 0));
                &mut self.buffer_counter.last_mut().expect("just pushed").1
            }
        };
        self.keys.push(buffer, *n);
        *n += 1;
        self.index.parse(index);
        let access = self.keys.len() as u32 - 1;
        for &r in &self.stack {
            let rec = &mut self.records[r];
            let stride = self.index.stride_of(rec.var);
            rec.touch.push((access, TouchPattern::new(stride)));
        }
    }

    fn exit(&mut self) {
        if self.skip.last() == Some(&self.stack.len()) {
            self.skip.pop();
            return;
        }
        let Some(&fi) = self.stack.last() else { return };
        let (length, first, n) = {
            let f = &self.records[fi];
            (f.length, f.first_access, f.touch.len())
        };
        // (a) count / reuse for this itervar and every enclosing one, by this itervar's strides.
        for k in 0..n {
            let nonzero = self.records[fi].touch[k].1.stride != 0;
            let access = first + k;
            for &s in &self.stack {
                let rec = &mut self.records[s];
                let q = &mut rec.touch[access - rec.first_access].1;
                if nonzero {
                    q.count = q.count.wrapping_mul(length);
                } else {
                    q.reuse = q.reuse.wrapping_mul(length);
                }
            }
        }
        self.stack.pop();
        // (b) the running top-down product (TVM bug copied: after a zero-length loop it stays 0).
        if length != 0 {
            self.topdown = self.topdown.wrapping_div(length);
        }
        // (c) bottom-up.
        let f = &mut self.records[fi];
        f.bottomup = f
            .touch
            .iter()
            .map(|(_, p)| p.count.wrapping_mul(p.reuse))
            .fold(-1, i64::max);
        // (d) push the bases to every open itervar one parallel level up, if the parent is one.
        let level = f.ann.parallel_level();
        if let Some(&parent) = self.stack.last() {
            if self.records[parent].ann.parallel_level() == level + 1 {
                let bases: Vec<(i64, i64)> = self.records[fi]
                    .touch
                    .iter()
                    .map(|(_, p)| (p.count, p.reuse))
                    .collect();
                for &s in &self.stack {
                    let rec = &mut self.records[s];
                    if rec.ann.parallel_level() != level + 1 {
                        continue;
                    }
                    for (k, &(count, reuse)) in bases.iter().enumerate() {
                        let q = &mut rec.touch[first + k - rec.first_access].1;
                        q.thread_reuse = reuse.wrapping_neg();
                        q.thread_count = count.wrapping_neg();
                    }
                }
            }
        }
        // (e) resolve this itervar's own bases.
        for (_, p) in &mut self.records[fi].touch {
            if p.thread_count < 0 {
                p.thread_count = p.count.wrapping_div(p.thread_count.wrapping_neg());
                let base = p.thread_reuse.wrapping_neg();
                // TVM divides by zero here (crash); a zero base gives 0.
                p.thread_reuse = if base == 0 {
                    0
                } else {
                    p.reuse.wrapping_div(base)
                };
            }
        }
    }

    fn finish(self) -> Features {
        // Rank of each key in byte-wise order, so rows sort integers, not strings.
        let mut order: Vec<u32> = (0..self.keys.len() as u32).collect();
        order.sort_by(|&a, &b| self.keys.get(a).cmp(self.keys.get(b)));
        let mut rank = vec![0u32; self.keys.len()];
        for (r, &a) in order.iter().enumerate() {
            rank[a as usize] = r as u32;
        }
        let mut rows = Vec::with_capacity(self.records.len());
        for rec in self.records {
            let mut touch = rec.touch;
            touch.sort_unstable_by_key(|&(a, _)| rank[a as usize]);
            rows.push(ItervarRow {
                name: rec.name,
                length: rec.length,
                nest_level: rec.nest_level,
                topdown: rec.topdown,
                bottomup: rec.bottomup,
                ann: rec.ann,
                arith: rec.arith,
                touch,
            });
        }
        Features {
            rows,
            key_text: self.keys.text,
            key_ends: self.keys.ends,
        }
    }
}

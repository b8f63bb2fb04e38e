//! The traversal of spec section 4: enter/exit of itervars, memory accesses, arithmetic.

use std::collections::HashMap;

use super::index::IndexPattern;
use super::{Annotation, Features, ItervarRow, Options, TouchPattern};
use crate::ir::{BinOp, DataType, Expr, ForKind, Stmt, VarId};
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
        records: Vec::new(),
        seen: HashMap::new(),
        stack: Vec::new(),
        skip: Vec::new(),
        topdown: 1,
        buffer_counter: HashMap::new(),
        keys: Vec::new(),
        allocated: Vec::new(),
        let_types: HashMap::new(),
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
    touch: Vec<TouchPattern>,
}

struct Extractor<'a> {
    options: &'a Options,
    /// In entry order, which is the output order.
    records: Vec<Record>,
    /// Variable -> its live record (every variable ever entered).
    seen: HashMap<VarId, usize>,
    /// Open records, outermost first.
    stack: Vec<usize>,
    /// Stack depths of skipped duplicate virtual threads.
    skip: Vec<usize>,
    topdown: i64,
    buffer_counter: HashMap<String, u32>,
    keys: Vec<String>,
    /// `allocate` scopes: buffer -> element type, innermost last.
    allocated: Vec<(String, DataType)>,
    let_types: HashMap<VarId, DataType>,
    index: IndexPattern,
}

impl Extractor<'_> {
    fn stmt(&mut self, s: &Stmt) -> Result<(), Error> {
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
                self.let_types.insert(var.id, t);
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
    fn expr(&mut self, e: &Expr) -> DataType {
        match e {
            Expr::Int(_) => DataType::INT32,
            Expr::Float(_, t) => *t,
            Expr::Var(v) => self
                .let_types
                .get(&v.id)
                .copied()
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
        if ann == Annotation::VirtualThread && self.seen.contains_key(&var) {
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
        self.seen.insert(var, idx);
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

    fn mem(&mut self, buffer: &str, index: &Expr) {
        let n = self.buffer_counter.entry(buffer.to_string()).or_insert(0);
        self.keys.push(format!("{buffer}_{n}"));
        *n += 1;
        self.index.parse(index);
        for &r in &self.stack {
            let rec = &mut self.records[r];
            let stride = self.index.stride_of(rec.var);
            rec.touch.push(TouchPattern::new(stride));
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
            let nonzero = self.records[fi].touch[k].stride != 0;
            let access = first + k;
            for &s in &self.stack {
                let rec = &mut self.records[s];
                let q = &mut rec.touch[access - rec.first_access];
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
            .map(|p| p.count.wrapping_mul(p.reuse))
            .fold(-1, i64::max);
        // (d) push the bases to every open itervar one parallel level up, if the parent is one.
        let level = f.ann.parallel_level();
        if let Some(&parent) = self.stack.last() {
            if self.records[parent].ann.parallel_level() == level + 1 {
                let bases: Vec<(i64, i64)> = self.records[fi]
                    .touch
                    .iter()
                    .map(|p| (p.count, p.reuse))
                    .collect();
                for &s in &self.stack {
                    let rec = &mut self.records[s];
                    if rec.ann.parallel_level() != level + 1 {
                        continue;
                    }
                    for (k, &(count, reuse)) in bases.iter().enumerate() {
                        let q = &mut rec.touch[first + k - rec.first_access];
                        q.thread_reuse = reuse.wrapping_neg();
                        q.thread_count = count.wrapping_neg();
                    }
                }
            }
        }
        // (e) resolve this itervar's own bases.
        for p in &mut self.records[fi].touch {
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
        order.sort_by(|&a, &b| self.keys[a as usize].cmp(&self.keys[b as usize]));
        let mut rank = vec![0u32; self.keys.len()];
        for (r, &a) in order.iter().enumerate() {
            rank[a as usize] = r as u32;
        }
        let mut rows = Vec::with_capacity(self.records.len());
        let mut insertion = Vec::with_capacity(self.records.len());
        for rec in self.records {
            let first = rec.first_access as u32;
            let mut touch: Vec<(u32, TouchPattern)> = rec
                .touch
                .into_iter()
                .enumerate()
                .map(|(k, p)| (first + k as u32, p))
                .collect();
            insertion.push(touch.iter().map(|&(a, _)| a).collect());
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
            keys: self.keys,
            insertion,
        }
    }
}

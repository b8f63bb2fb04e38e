//! The text form of `loop-ir-text.md` -> [`Program`].

use std::collections::HashMap;

use crate::ir::{DataType, Expr, ForKind, Stmt, Var, VarId};
use crate::lexer::{lex, Tok, Token};
use crate::{Error, Program};

mod expr;

/// Parses IR text. Errors are `LINE:COL: what was expected`; the parser never panics.
///
/// ```
/// let p = layoutkit_loopir::parse("for (x, 0, 8) {\n  C[x] = (A[x] + 1f)\n}").unwrap();
/// assert_eq!(p.var_count(), 1);
/// ```
pub fn parse(text: &str) -> Result<Program, Error> {
    let tokens = lex(text, 1, 1)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        scopes: Vec::new(),
        free: HashMap::new(),
        next_id: 0,
        depth: 0,
        expr_depth: 0,
    };
    let body = p.parse_seq(false)?;
    let mut free: Vec<Var> = p.free.into_values().collect();
    free.sort_by_key(|v| v.id);
    Ok(Program {
        body,
        free_vars: free,
        var_count: p.next_id,
    })
}

/// Nesting limits, so that hostile input cannot overflow the stack (recursion in the parser,
/// the extractor and the printer): statement blocks and expression levels.
const MAX_STMT_DEPTH: usize = 64;
const MAX_EXPR_DEPTH: usize = 128;

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
    scopes: Vec<Var>,
    free: HashMap<String, Var>,
    next_id: u32,
    depth: usize,
    expr_depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok<'a> {
        &self.tokens[self.pos].tok
    }

    fn peek_at(&self, k: usize) -> &Tok<'a> {
        let i = (self.pos + k).min(self.tokens.len() - 1);
        &self.tokens[i].tok
    }

    fn here(&self) -> (usize, usize) {
        let t = &self.tokens[self.pos];
        (t.line, t.col)
    }

    fn bump(&mut self) -> Tok<'a> {
        let t = self.tokens[self.pos].tok;
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn error<T>(&self, expected: &str) -> Result<T, Error> {
        let (line, col) = self.here();
        Err(Error::at(
            line,
            col,
            format!("expected {expected}, found {}", self.peek().describe()),
        ))
    }

    fn expect_punct(&mut self, p: &str) -> Result<(), Error> {
        if *self.peek() == Tok::Punct(static_punct(p)) {
            self.bump();
            Ok(())
        } else {
            self.error(&format!("`{p}`"))
        }
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if *self.peek() == Tok::Punct(static_punct(p)) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn skip_newlines(&mut self) {
        while *self.peek() == Tok::Newline {
            self.bump();
        }
    }

    fn ident(&mut self, what: &str) -> Result<String, Error> {
        match *self.peek() {
            Tok::Ident(s) => {
                let s = s.to_string();
                self.bump();
                Ok(s)
            }
            _ => self.error(what),
        }
    }

    fn new_var(&mut self, name: String) -> Var {
        let v = Var {
            id: VarId(self.next_id),
            name,
        };
        self.next_id += 1;
        v
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_STMT_DEPTH {
            let (line, col) = self.here();
            let message = format!("statements nested deeper than {MAX_STMT_DEPTH}");
            return Err(Error::at(line, col, message));
        }
        Ok(())
    }

    fn enter_expr(&mut self) -> Result<(), Error> {
        self.expr_depth += 1;
        if self.expr_depth > MAX_EXPR_DEPTH {
            let (line, col) = self.here();
            let message = format!("expression nested deeper than {MAX_EXPR_DEPTH}");
            return Err(Error::at(line, col, message));
        }
        Ok(())
    }

    /// Statements up to `}` (if `in_braces`) or the end of input. Scoped statements (attr, let,
    /// allocate) take the rest of the sequence as their body.
    fn parse_seq(&mut self, in_braces: bool) -> Result<Stmt, Error> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            self.skip_newlines();
            match self.peek() {
                Tok::Punct("}") if in_braces => break,
                Tok::Eof if !in_braces => break,
                Tok::Eof => return self.error("`}`"),
                Tok::Punct("}") => return self.error("a statement"),
                _ => {}
            }
            if let Some(scoped) = self.parse_scoped(in_braces)? {
                items.push(scoped);
                break;
            }
            items.push(self.parse_stmt()?);
            match self.peek() {
                Tok::Newline | Tok::Eof | Tok::Punct("}") => {}
                _ => return self.error("end of line after a statement"),
            }
        }
        self.depth -= 1;
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(Stmt::Seq(Vec::new()))
        } else {
            Stmt::Seq(items)
        })
    }

    /// attr / let / allocate: parse the header, then the rest of the sequence as the body.
    fn parse_scoped(&mut self, in_braces: bool) -> Result<Option<Stmt>, Error> {
        match *self.peek() {
            Tok::Attr(text, col) => {
                let line = self.tokens[self.pos].line;
                self.bump();
                Ok(Some(self.parse_attr(text, line, col, in_braces)?))
            }
            Tok::Ident(k) if k == "let" && matches!(self.peek_at(1), Tok::Ident(_)) => {
                self.bump();
                let name = self.ident("a variable name")?;
                self.expect_punct("=")?;
                let value = self.parse_expr()?;
                self.end_of_header()?;
                let var = self.new_var(name);
                self.scopes.push(var.clone());
                let body = self.parse_seq(in_braces)?;
                self.scopes.pop();
                Ok(Some(Stmt::Let {
                    var,
                    value,
                    body: Box::new(body),
                }))
            }
            Tok::Ident(k) if k == "allocate" && matches!(self.peek_at(1), Tok::Ident(_)) => {
                self.bump();
                let buffer = self.ident("a buffer name")?;
                self.expect_punct("[")?;
                let tname = self.ident("an element type such as float32")?;
                let dtype = DataType::parse(&tname).map_or_else(
                    || self.error_back(&format!("`{tname}` is not an element type")),
                    Ok,
                )?;
                let mut extents = Vec::new();
                while self.eat_punct("*") {
                    extents.push(self.parse_expr()?);
                }
                self.expect_punct("]")?;
                self.end_of_header()?;
                let body = self.parse_seq(in_braces)?;
                Ok(Some(Stmt::Allocate {
                    buffer,
                    dtype,
                    extents,
                    body: Box::new(body),
                }))
            }
            _ => Ok(None),
        }
    }

    fn error_back<T>(&self, message: &str) -> Result<T, Error> {
        let t = &self.tokens[self.pos.saturating_sub(1)];
        Err(Error::at(t.line, t.col, message))
    }

    fn end_of_header(&mut self) -> Result<(), Error> {
        match self.peek() {
            Tok::Newline | Tok::Eof | Tok::Punct("}") => Ok(()),
            _ => self.error("end of line"),
        }
    }

    fn parse_attr(
        &mut self,
        text: &str,
        line: usize,
        col: usize,
        in_braces: bool,
    ) -> Result<Stmt, Error> {
        let toks = lex(text, line, col)?;
        let mut sub = Parser {
            tokens: toks,
            pos: 0,
            scopes: std::mem::take(&mut self.scopes),
            free: std::mem::take(&mut self.free),
            next_id: self.next_id,
            depth: self.depth,
            expr_depth: 0,
        };
        let header = sub.parse_attr_header();
        self.scopes = std::mem::take(&mut sub.scopes);
        self.free = std::mem::take(&mut sub.free);
        self.next_id = sub.next_id;
        match header? {
            AttrHeader::Binding { key, name, extent } => {
                let var = self.new_var(name);
                self.scopes.push(var.clone());
                let body = Box::new(self.parse_seq(in_braces)?);
                self.scopes.pop();
                Ok(if key == "thread_extent" {
                    Stmt::ThreadExtent { var, extent, body }
                } else {
                    Stmt::VirtualThread { var, extent, body }
                })
            }
            AttrHeader::Other => {
                let body = Box::new(self.parse_seq(in_braces)?);
                Ok(Stmt::Attr {
                    text: text.trim().to_string(),
                    body,
                })
            }
        }
    }

    fn parse_attr_header(&mut self) -> Result<AttrHeader, Error> {
        self.expect_punct("[")?;
        let mut name = None;
        // Brackets and parentheses open: the `[` just read, and `iter_var(` if present.
        let mut depth = 1usize;
        if *self.peek() == Tok::Ident("iter_var") && *self.peek_at(1) == Tok::Punct("(") {
            self.bump();
            self.bump();
            depth += 1;
            name = Some(self.ident("the itervar's name")?);
        }
        // Skip to the matching `]`.
        loop {
            match self.bump() {
                Tok::Punct("[") | Tok::Punct("(") => depth += 1,
                Tok::Punct("]") | Tok::Punct(")") => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Eof => return self.error("`]` closing the attr node"),
                _ => {}
            }
        }
        let key_pos = self.here();
        let key = self.ident("the attr key")?;
        if key != "thread_extent" && key != "virtual_thread" {
            return Ok(AttrHeader::Other);
        }
        let Some(name) = name else {
            return Err(Error::at(
                key_pos.0,
                key_pos.1,
                format!("{key} needs an itervar: `// attr [iter_var(NAME, ...)] {key} = N`"),
            ));
        };
        if key == "thread_extent" && thread_ann(&name).is_none() {
            return Err(Error::at(
                key_pos.0,
                key_pos.1,
                format!("invalid thread itervar `{name}`: a thread_extent binds blockIdx.x|y|z or threadIdx.x|y|z"),
            ));
        }
        self.expect_punct("=")?;
        let value_pos = self.here();
        let extent = self.parse_expr()?;
        if !matches!(extent, Expr::Int(_)) {
            return Err(Error::at(
                value_pos.0,
                value_pos.1,
                format!("the {key} of `{name}` must be an integer constant"),
            ));
        }
        if *self.peek() != Tok::Eof {
            return self.error("end of the attr line");
        }
        Ok(AttrHeader::Binding { key, name, extent })
    }

    fn parse_block(&mut self) -> Result<Stmt, Error> {
        self.expect_punct("{")?;
        let body = self.parse_seq(true)?;
        self.expect_punct("}")?;
        Ok(body)
    }

    fn parse_stmt(&mut self) -> Result<Stmt, Error> {
        let tok = *self.peek();
        match tok {
            Tok::Punct("{") => self.parse_block(),
            Tok::Ident(k) => {
                let next = *self.peek_at(1);
                match (k, &next) {
                    ("produce", Tok::Ident(_)) => {
                        self.bump();
                        let name = self.ident("a producer name")?;
                        let body = self.parse_block()?;
                        Ok(Stmt::Produce {
                            name,
                            body: Box::new(body),
                        })
                    }
                    ("for" | "parallel" | "unrolled" | "vectorized", Tok::Punct("(")) => {
                        self.bump();
                        let kind = match k {
                            "for" => ForKind::Serial,
                            "parallel" => ForKind::Parallel,
                            "unrolled" => ForKind::Unrolled,
                            _ => ForKind::Vectorized,
                        };
                        self.expect_punct("(")?;
                        let name = self.ident("the loop variable")?;
                        self.expect_punct(",")?;
                        let min = self.parse_expr()?;
                        self.expect_punct(",")?;
                        let extent = self.parse_expr()?;
                        self.expect_punct(")")?;
                        let var = self.new_var(name);
                        self.scopes.push(var.clone());
                        let body = self.parse_block();
                        self.scopes.pop();
                        Ok(Stmt::For {
                            var,
                            min,
                            extent,
                            kind,
                            body: Box::new(body?),
                        })
                    }
                    ("if", Tok::Punct("(")) => {
                        self.bump();
                        let cond = self.parse_expr()?;
                        let then = Box::new(self.parse_block()?);
                        let save = self.pos;
                        self.skip_newlines();
                        let otherwise = if *self.peek() == Tok::Ident("else") {
                            self.bump();
                            if *self.peek() == Tok::Ident("if") {
                                Some(Box::new(self.parse_stmt()?))
                            } else {
                                Some(Box::new(self.parse_block()?))
                            }
                        } else {
                            self.pos = save;
                            None
                        };
                        Ok(Stmt::If {
                            cond,
                            then,
                            otherwise,
                        })
                    }
                    ("evaluate", Tok::Punct("(")) => {
                        self.bump();
                        self.expect_punct("(")?;
                        let e = self.parse_expr()?;
                        self.expect_punct(")")?;
                        Ok(Stmt::Evaluate(e))
                    }
                    (_, Tok::Punct("[")) => {
                        self.bump();
                        self.bump();
                        let index = self.parse_expr()?;
                        self.expect_punct("]")?;
                        self.expect_punct("=")?;
                        let value = self.parse_expr()?;
                        Ok(Stmt::Store {
                            buffer: k.to_string(),
                            index,
                            value,
                        })
                    }
                    _ => self.error("a statement (for, parallel, unrolled, vectorized, produce, if, let, allocate, evaluate, // attr, or BUFFER[index] = value)"),
                }
            }
            _ => self.error("a statement"),
        }
    }
}

enum AttrHeader {
    Binding {
        key: String,
        name: String,
        extent: Expr,
    },
    Other,
}

/// The annotation a thread_extent variable name selects (None: not a thread name).
pub(crate) fn thread_ann(name: &str) -> Option<crate::features::Annotation> {
    use crate::features::Annotation::*;
    Some(match name {
        "blockIdx.x" => BlockX,
        "blockIdx.y" => BlockY,
        "blockIdx.z" => BlockZ,
        "threadIdx.x" => ThreadX,
        "threadIdx.y" => ThreadY,
        "threadIdx.z" => ThreadZ,
        _ => return None,
    })
}

pub(super) fn static_punct(p: &str) -> &'static str {
    const ALL: [&str; 23] = [
        "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", "=", "+", "-", "*",
        "/", "%", "<", ">", "!", ":",
    ];
    ALL.iter().find(|q| **q == p).copied().unwrap_or("")
}

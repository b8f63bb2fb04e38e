//! Expressions of the IR text: C precedence, unary operators, calls and casts, buffer loads
//! and variable lookups.

use crate::ir::{BinOp, DataType, Expr, Var};
use crate::lexer::Tok;
use crate::Error;

use super::Parser;

impl<'a> Parser<'a> {
    /// An expression, with C precedence; newlines inside parentheses are allowed.
    pub(crate) fn parse_expr(&mut self) -> Result<Expr, Error> {
        self.parse_binary(1)
    }

    pub(super) fn parse_binary(&mut self, min_prec: u8) -> Result<Expr, Error> {
        let mut lhs = self.parse_unary()?;
        loop {
            let op = match self.peek() {
                Tok::Punct(p) => binop(p),
                _ => None,
            };
            let Some(op) = op else { break };
            if op.precedence() < min_prec {
                break;
            }
            self.bump();
            let rhs = self.parse_binary(op.precedence() + 1)?;
            lhs = Expr::Binary {
                op,
                a: Box::new(lhs),
                b: Box::new(rhs),
            };
        }
        Ok(lhs)
    }

    fn parse_unary(&mut self) -> Result<Expr, Error> {
        self.enter_expr()?;
        let e = match *self.peek() {
            Tok::Punct("!") => {
                self.bump();
                Expr::Not(Box::new(self.parse_unary()?))
            }
            Tok::Punct("-") => {
                self.bump();
                match *self.peek() {
                    Tok::Int(v) => {
                        self.bump();
                        if v > 1u64 << 63 {
                            return self.error_back("integer literal out of range");
                        }
                        Expr::Int((v as i128).wrapping_neg() as i64)
                    }
                    Tok::Float(v, s) => {
                        self.bump();
                        Expr::Float(-v, suffix_type(s))
                    }
                    // TVM's negation is multiplication by -1.
                    _ => Expr::Binary {
                        op: BinOp::Mul,
                        a: Box::new(self.parse_unary()?),
                        b: Box::new(Expr::Int(-1)),
                    },
                }
            }
            _ => self.parse_primary()?,
        };
        self.expr_depth -= 1;
        Ok(e)
    }

    fn parse_args(&mut self) -> Result<Vec<Expr>, Error> {
        self.expect_punct("(")?;
        let mut args = Vec::new();
        self.skip_newlines();
        if self.eat_punct(")") {
            return Ok(args);
        }
        loop {
            self.skip_newlines();
            args.push(self.parse_expr()?);
            self.skip_newlines();
            if self.eat_punct(")") {
                return Ok(args);
            }
            self.expect_punct(",")?;
        }
    }

    fn parse_primary(&mut self) -> Result<Expr, Error> {
        match *self.peek() {
            Tok::Int(v) => {
                self.bump();
                if v > i64::MAX as u64 {
                    return self.error_back("integer literal out of range");
                }
                Ok(Expr::Int(v as i64))
            }
            Tok::Float(v, s) => {
                self.bump();
                Ok(Expr::Float(v, suffix_type(s)))
            }
            Tok::Punct("(") => {
                self.bump();
                self.skip_newlines();
                let e = self.parse_expr()?;
                self.skip_newlines();
                self.expect_punct(")")?;
                Ok(e)
            }
            Tok::Ident(name) => {
                let (line, col) = self.here();
                self.bump();
                match self.peek() {
                    Tok::Punct("[") => {
                        self.bump();
                        let index = self.parse_expr()?;
                        self.expect_punct("]")?;
                        Ok(Expr::Load {
                            buffer: name.to_string(),
                            index: Box::new(index),
                        })
                    }
                    Tok::Punct("(") => {
                        let args = self.parse_args()?;
                        self.call(name.to_string(), args, line, col)
                    }
                    _ => Ok(Expr::Var(self.lookup(name))),
                }
            }
            _ => self.error("an expression"),
        }
    }

    fn call(
        &mut self,
        name: String,
        mut args: Vec<Expr>,
        line: usize,
        col: usize,
    ) -> Result<Expr, Error> {
        let arity = |n: usize, args: &Vec<Expr>| -> Result<(), Error> {
            if args.len() == n {
                Ok(())
            } else {
                Err(Error::at(
                    line,
                    col,
                    format!("`{name}` takes {n} argument(s), not {}", args.len()),
                ))
            }
        };
        if let Some(dtype) = DataType::parse(&name) {
            arity(1, &args)?;
            return Ok(Expr::Cast {
                dtype,
                value: Box::new(args.remove(0)),
            });
        }
        if name == "ramp" {
            arity(3, &args)?;
            let lanes = match args[2] {
                Expr::Int(l) if (1..=u16::MAX as i64).contains(&l) => l as u16,
                _ => {
                    return Err(Error::at(
                        line,
                        col,
                        "the lanes of `ramp` must be a positive integer constant",
                    ))
                }
            };
            let stride = args.remove(1);
            let base = args.remove(0);
            return Ok(Expr::Ramp {
                base: Box::new(base),
                stride: Box::new(stride),
                lanes,
            });
        }
        if let Some(lanes) = name.strip_prefix('x').and_then(|d| d.parse::<u16>().ok()) {
            arity(1, &args)?;
            if lanes == 0 {
                return Err(Error::at(line, col, "a broadcast needs at least one lane"));
            }
            return Ok(Expr::Broadcast {
                value: Box::new(args.remove(0)),
                lanes,
            });
        }
        Ok(Expr::Call { name, args })
    }

    fn lookup(&mut self, name: &str) -> Var {
        if let Some(v) = self.scopes.iter().rev().find(|v| v.name == name) {
            return v.clone();
        }
        if let Some(v) = self.free.get(name) {
            return v.clone();
        }
        let v = self.new_var(name.to_string());
        self.free.insert(name.to_string(), v.clone());
        v
    }
}

fn suffix_type(s: char) -> DataType {
    match s {
        'h' => DataType::FLOAT16,
        'd' => DataType::FLOAT64,
        _ => DataType::FLOAT32,
    }
}

fn binop(p: &str) -> Option<BinOp> {
    Some(match p {
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "%" => BinOp::Mod,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "&&" => BinOp::And,
        "||" => BinOp::Or,
        _ => return None,
    })
}

//! Tokens of the IR text form, with line and column (1-based; columns count characters).
//! The grammar is ASCII; other characters may appear only in comments and strings.

use crate::Error;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Tok<'a> {
    Ident(&'a str),
    /// A non-negative integer literal (the parser folds a leading minus into it).
    Int(u64),
    /// Value and suffix (`f`, `h` or `d`).
    Float(f64, char),
    Str(&'a str),
    /// `// attr ...`: the rest of the line (after `attr`), and the column where it starts.
    Attr(&'a str, usize),
    Punct(&'static str),
    Newline,
    Eof,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Token<'a> {
    pub tok: Tok<'a>,
    pub line: usize,
    pub col: usize,
}

const PUNCT2: [&str; 6] = ["<=", ">=", "==", "!=", "&&", "||"];
const PUNCT1: [&str; 17] = [
    "(", ")", "[", "]", "{", "}", ",", "=", "+", "-", "*", "/", "%", "<", ">", "!", ":",
];

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// Tokenises `text`; `line0`/`col0` give the position of its first character (for attr lines).
pub(crate) fn lex(text: &str, line0: usize, col0: usize) -> Result<Vec<Token<'_>>, Error> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 3);
    let (mut i, mut line, mut col) = (0usize, line0, col0);
    while i < b.len() {
        let c = b[i];
        let (tline, tcol) = (line, col);
        let mut push = |tok| {
            out.push(Token {
                tok,
                line: tline,
                col: tcol,
            })
        };
        match c {
            b'\n' => {
                push(Tok::Newline);
                i += 1;
                line += 1;
                col = 1;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                col += 1;
            }
            b'#' | b'/' if c == b'#' || b.get(i + 1) == Some(&b'/') => {
                let start = i;
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                let comment = &text[start..i];
                if let Some(rest) = comment.strip_prefix("//") {
                    let trimmed = rest.trim_start();
                    if let Some(after) = trimmed.strip_prefix("attr") {
                        if after.is_empty() || after.starts_with(char::is_whitespace) {
                            let lead = comment.chars().count() - after.chars().count();
                            push(Tok::Attr(after, tcol + lead));
                        }
                    }
                }
                col += comment.chars().count();
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < b.len() && is_ident_char(b[i]) {
                    i += 1;
                }
                // A name never ends with a dot.
                while i > start + 1 && b[i - 1] == b'.' {
                    i -= 1;
                }
                push(Tok::Ident(&text[start..i]));
                col += i - start;
            }
            b'0'..=b'9' => {
                let start = i;
                let tok = number(text, &mut i).map_err(|m| Error::at(tline, tcol, m))?;
                push(tok);
                col += i - start;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += 1;
                }
                if i >= b.len() || b[i] != b'"' {
                    return Err(Error::at(tline, tcol, "unterminated string"));
                }
                i += 1;
                push(Tok::Str(&text[start + 1..i - 1]));
                col += text[start..i].chars().count();
            }
            _ => {
                let two = text.get(i..i + 2).unwrap_or("");
                let p = PUNCT2
                    .iter()
                    .find(|p| **p == two)
                    .or_else(|| PUNCT1.iter().find(|p| p.as_bytes()[0] == c));
                match p {
                    Some(p) => {
                        push(Tok::Punct(p));
                        i += p.len();
                        col += p.len();
                    }
                    None => {
                        let ch = text[i..].chars().next().unwrap_or('?');
                        return Err(Error::at(
                            tline,
                            tcol,
                            format!("unexpected character `{ch}`"),
                        ));
                    }
                }
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    Ok(out)
}

/// An integer or a suffixed float literal starting at `*i` (a digit); advances `*i`.
fn number<'a>(text: &'a str, i: &mut usize) -> Result<Tok<'a>, String> {
    let b = text.as_bytes();
    let start = *i;
    let digits = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
    };
    digits(i);
    let mut is_float = false;
    if *i < b.len() && b[*i] == b'.' && b.get(*i + 1).is_some_and(u8::is_ascii_digit) {
        is_float = true;
        *i += 1;
        digits(i);
    }
    if *i < b.len() && (b[*i] == b'e' || b[*i] == b'E') {
        let mut j = *i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            is_float = true;
            *i = j;
            digits(i);
        }
    }
    let lit = &text[start..*i];
    let suffix = b
        .get(*i)
        .copied()
        .filter(|s| matches!(s, b'f' | b'h' | b'd'))
        .filter(|_| {
            !b.get(*i + 1)
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'_')
        });
    match suffix {
        Some(s) => {
            let v: f64 = lit.parse().map_err(|_| format!("bad number `{lit}`"))?;
            *i += 1;
            Ok(Tok::Float(v, s as char))
        }
        None if is_float => Err(format!(
            "float literal `{lit}` needs a type suffix: {lit}f (float32), {lit}h (float16) or {lit}d (float64)"
        )),
        None => lit
            .parse()
            .map(Tok::Int)
            .map_err(|_| format!("integer `{lit}` is too large")),
    }
}

impl Tok<'_> {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v, s) => format!("`{v}{s}`"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Attr(..) => "`// attr`".into(),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Newline => "end of line".into(),
            Tok::Eof => "end of input".into(),
        }
    }
}

//! Tokens of the IR text form, with line and column (1-based, in characters).

use crate::Error;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    /// A non-negative integer literal (the parser folds a leading minus into it).
    Int(u64),
    /// Value and suffix (`f`, `h` or `d`).
    Float(f64, char),
    Str(String),
    /// `// attr ...`: the rest of the line (after `attr`), and the column where it starts.
    Attr(String, usize),
    Punct(&'static str),
    Newline,
    Eof,
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
}

const PUNCTS: [&str; 23] = [
    "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", "=", "+", "-", "*", "/",
    "%", "<", ">", "!", ":",
];

/// Tokenises `text`; `line0`/`col0` give the position of its first character (for attr lines).
pub(crate) fn lex(text: &str, line0: usize, col0: usize) -> Result<Vec<Token>, Error> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, line0, col0);
    while i < chars.len() {
        let c = chars[i];
        let (tline, tcol) = (line, col);
        let push = |out: &mut Vec<Token>, tok: Tok| {
            out.push(Token {
                tok,
                line: tline,
                col: tcol,
            })
        };
        if c == '\n' {
            push(&mut out, Tok::Newline);
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '#' || (c == '/' && chars.get(i + 1) == Some(&'/')) {
            let start = i;
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            let comment: String = chars[start..i].iter().collect();
            if let Some(rest) = comment.strip_prefix("//") {
                let trimmed = rest.trim_start();
                if let Some(after) = trimmed.strip_prefix("attr") {
                    if after.is_empty() || after.starts_with(char::is_whitespace) {
                        let lead = comment.chars().count() - after.chars().count();
                        push(&mut out, Tok::Attr(after.to_string(), tcol + lead));
                    }
                }
            }
            col += i - start;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            // A name never ends with a dot.
            while i > start + 1 && chars[i - 1] == '.' {
                i -= 1;
            }
            push(&mut out, Tok::Ident(chars[start..i].iter().collect()));
            col += i - start;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let mut is_float = false;
            if i < chars.len()
                && chars[i] == '.'
                && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())
            {
                is_float = true;
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    is_float = true;
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let digits: String = chars[start..i].iter().collect();
            let suffix = chars
                .get(i)
                .copied()
                .filter(|s| matches!(s, 'f' | 'h' | 'd'));
            let suffix = suffix.filter(|_| {
                !chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '_')
            });
            match suffix {
                Some(s) => {
                    let v: f64 = digits
                        .parse()
                        .map_err(|_| Error::at(tline, tcol, format!("bad number `{digits}`")))?;
                    i += 1;
                    push(&mut out, Tok::Float(v, s));
                }
                None if is_float => {
                    return Err(Error::at(
                        tline,
                        tcol,
                        format!("float literal `{digits}` needs a type suffix: {digits}f (float32), {digits}h (float16) or {digits}d (float64)"),
                    ))
                }
                None => {
                    let v: u64 = digits.parse().map_err(|_| {
                        Error::at(tline, tcol, format!("integer `{digits}` is too large"))
                    })?;
                    push(&mut out, Tok::Int(v));
                }
            }
            col += i - start;
            continue;
        }
        if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                i += 1;
            }
            if i >= chars.len() || chars[i] != '"' {
                return Err(Error::at(tline, tcol, "unterminated string"));
            }
            i += 1;
            push(&mut out, Tok::Str(chars[start + 1..i - 1].iter().collect()));
            col += i - start;
            continue;
        }
        let rest: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        match PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                push(&mut out, Tok::Punct(p));
                i += p.len();
                col += p.len();
            }
            None => {
                return Err(Error::at(
                    tline,
                    tcol,
                    format!("unexpected character `{c}`"),
                ))
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

impl Tok {
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

//! The letter grammar shared by canonical (TVM) names and oneDNN tags:
//! a sequence of tokens, each an optional block size followed by one letter.
//!
//! * canonical: upper case = an axis, `<k><lower case>` = a block (`NCHW8c`);
//! * oneDNN: a lower-case letter with no size is a plain axis (`nchw`, `Ohwi16o`); an upper-case
//!   letter is an axis that also has blocks. Both map to the same [`Layout`].

use crate::{Axis, Error, Layout, Result, Token};

pub(super) fn parse(name: &str) -> Result<Layout> {
    let tokens = tokens(name).map_err(|reason| Error::Format {
        input: name.to_string(),
        reason,
    })?;
    Layout::new(name, tokens)
}

/// The tokens of `name`, or the reason they do not parse.
pub(super) fn tokens(name: &str) -> std::result::Result<Vec<Token>, String> {
    let err = |reason: String| reason;
    let mut tokens = Vec::new();
    let mut digits = String::new();
    for (pos, ch) in name.char_indices() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        if !ch.is_ascii_alphabetic() {
            return Err(err(format!(
                "unexpected `{ch}` at position {pos} (run `layoutkit formats` for the accepted names)"
            )));
        }
        let Some(axis) = Axis::from_letter(ch) else {
            return Err(err(format!("`{ch}` is not an axis")));
        };
        if digits.is_empty() {
            tokens.push(Token::Axis(axis));
        } else {
            if ch.is_ascii_uppercase() {
                return Err(err(format!(
                    "block `{digits}{ch}` must use a lower-case letter: `{digits}{}`",
                    axis.block_letter()
                )));
            }
            let size: usize = digits
                .parse()
                .map_err(|_| err(format!("block size `{digits}` is too large")))?;
            tokens.push(Token::Block { axis, size });
            digits.clear();
        }
    }
    if !digits.is_empty() {
        return Err(err(format!(
            "block size `{digits}` at the end has no letter (write e.g. `{digits}c`)"
        )));
    }
    Ok(tokens)
}

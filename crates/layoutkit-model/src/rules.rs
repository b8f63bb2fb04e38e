//! `--rule NAME_GLOB=TARGET`: per-tensor overrides of the role or the target layout.

use layoutkit_core::parse_format;

use crate::roles::Role;
use crate::{Error, Result};

/// One rule. `TARGET` is a role (`depthwise`, `dense`, `keep`, ...; see [`Role::parse`]), a
/// layout name (`OIHW16i16o`, `mace:conv2d_filter`, ...), or `ROLE@LAYOUT`. The first rule
/// whose glob matches a tensor's whole name applies.
///
/// ```
/// use layoutkit_model::Rule;
/// let r = Rule::parse("features.*.dw.weight=depthwise").unwrap();
/// assert!(r.matches("features.3.dw.weight"));
/// assert!(!r.matches("features.3.pw.weight"));
/// let r = Rule::parse("fc.weight=dense@OIhw16i16o").unwrap();
/// assert_eq!(r.layout.as_deref(), Some("OIhw16i16o"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The rule as written.
    pub text: String,
    /// `*` matches any run of characters (dots included), `?` one character.
    pub glob: String,
    pub role: Option<Role>,
    pub layout: Option<String>,
}

impl Rule {
    /// Parses `NAME_GLOB=TARGET`.
    pub fn parse(text: &str) -> Result<Rule> {
        let err = |reason: String| Error::Rule {
            rule: text.to_string(),
            reason,
        };
        let (glob, target) = text.split_once('=').ok_or_else(|| {
            err("expected NAME_GLOB=TARGET (a role, a layout, or ROLE@LAYOUT)".into())
        })?;
        let (glob, target) = (glob.trim(), target.trim());
        if glob.is_empty() || target.is_empty() {
            return Err(err("the glob and the target must not be empty".into()));
        }
        let check_layout = |l: &str| {
            parse_format(l)
                .map(|_| l.to_string())
                .map_err(|e| err(format!("`{l}` is neither a role (conv, depthwise[:M], grouped:G, deconv[:G], dense, dense-io, bias, vector, keep) nor a layout: {e}")))
        };
        let (role, layout) = match target.split_once('@') {
            Some((r, l)) => (
                Some(Role::parse(r).ok_or_else(|| err(format!("`{r}` is not a role")))?),
                Some(check_layout(l)?),
            ),
            None => match Role::parse(target) {
                Some(r) => (Some(r), None),
                None => (None, Some(check_layout(target)?)),
            },
        };
        Ok(Rule {
            text: text.to_string(),
            glob: glob.to_string(),
            role,
            layout,
        })
    }

    /// Whether the glob matches the whole of `name`.
    pub fn matches(&self, name: &str) -> bool {
        glob_match(self.glob.as_bytes(), name.as_bytes())
    }
}

/// `*` and `?` matching with backtracking to the last star (linear in practice).
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything.at.all"));
        assert!(glob_match(b"a*.w", b"a.b.c.w"));
        assert!(!glob_match(b"a*.w", b"a.b.c.b"));
        assert!(glob_match(b"l?.w", b"l1.w"));
        assert!(!glob_match(b"l?.w", b"l12.w"));
        assert!(glob_match(b"*a*a*", b"banana"));
        assert!(glob_match(b"", b""));
        assert!(!glob_match(b"", b"x"));
    }

    #[test]
    fn targets() {
        let r = Rule::parse("x=keep").unwrap();
        assert_eq!((r.role, r.layout), (Some(Role::Keep), None));
        let r = Rule::parse("x=mace:conv2d_filter").unwrap();
        assert_eq!(
            (r.role, r.layout.as_deref()),
            (None, Some("mace:conv2d_filter"))
        );
        assert!(Rule::parse("x").is_err());
        assert!(Rule::parse("x=nope@OIHW").is_err());
        let e = Rule::parse("x=NOT_A_LAYOUT!").unwrap_err().to_string();
        assert!(e.contains("neither a role"), "{e}");
    }
}

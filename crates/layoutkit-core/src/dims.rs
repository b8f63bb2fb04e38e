use std::fmt;

use crate::{Axis, Error, Result};

/// Logical extents by axis, in the order given: `N=16,C=3,H=224,W=224`.
///
/// ```
/// use layoutkit_core::{Axis, Dims};
/// let d = Dims::parse("N=2, c=5,H=1,W=7").unwrap();
/// assert_eq!(d.get(Axis::from_letter('C').unwrap()), Some(5));
/// assert_eq!(d.to_string(), "N=2,C=5,H=1,W=7");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Dims {
    entries: Vec<(Axis, usize)>,
}

impl Dims {
    /// Dims from `(axis, extent)` pairs. Contract: no axis twice (an error otherwise).
    pub fn new(entries: Vec<(Axis, usize)>) -> Result<Dims> {
        for (i, (a, _)) in entries.iter().enumerate() {
            if entries[..i].iter().any(|(b, _)| b == a) {
                return Err(Error::Dims {
                    input: Dims::display_pairs(&entries),
                    reason: format!("axis {a} is given twice"),
                });
            }
        }
        Ok(Dims { entries })
    }

    /// Parses `A=1,B=2,...` (axis letters in either case, spaces allowed around items).
    pub fn parse(input: &str) -> Result<Dims> {
        let err = |reason: String| Error::Dims {
            input: input.to_string(),
            reason,
        };
        let mut entries = Vec::new();
        for item in input.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(err("empty item (expected AXIS=EXTENT, e.g. N=16)".into()));
            }
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| err(format!("`{item}` is not AXIS=EXTENT")))?;
            let name = name.trim();
            let mut chars = name.chars();
            let axis = match (chars.next(), chars.next()) {
                (Some(c), None) => Axis::from_letter(c),
                _ => None,
            }
            .ok_or_else(|| err(format!("`{name}` is not an axis (one letter)")))?;
            let value = value.trim();
            let extent: usize = value
                .parse()
                .map_err(|_| err(format!("extent `{value}` of {axis} is not a whole number")))?;
            entries.push((axis, extent));
        }
        Dims::new(entries).map_err(|e| match e {
            Error::Dims { reason, .. } => err(reason),
            other => other,
        })
    }

    /// The extent of `axis`, if given.
    pub fn get(&self, axis: Axis) -> Option<usize> {
        self.entries
            .iter()
            .find(|(a, _)| *a == axis)
            .map(|&(_, e)| e)
    }

    /// `(axis, extent)` pairs in the order given.
    pub fn entries(&self) -> &[(Axis, usize)] {
        &self.entries
    }

    fn display_pairs(entries: &[(Axis, usize)]) -> String {
        entries
            .iter()
            .map(|(a, e)| format!("{a}={e}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Dims::display_pairs(&self.entries))
    }
}

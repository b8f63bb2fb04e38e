use std::fmt;

/// A logical axis, named by one upper-case ASCII letter (`N`, `C`, `H`, `W`, `O`, `I`, ...).
///
/// Blocks of the axis are written with the lower-case letter (`8c` is a block of `C`).
///
/// ```
/// use layoutkit_core::Axis;
/// let c = Axis::from_letter('c').unwrap();
/// assert_eq!(c.letter(), 'C');
/// assert_eq!(c.block_letter(), 'c');
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Axis(u8);

impl Axis {
    /// The axis named by `letter`, in either case; `None` for anything but an ASCII letter.
    pub fn from_letter(letter: char) -> Option<Axis> {
        letter
            .is_ascii_alphabetic()
            .then(|| Axis(letter.to_ascii_uppercase() as u8))
    }

    /// The axis's name, upper case.
    pub fn letter(self) -> char {
        self.0 as char
    }

    /// The letter that names a block of this axis (lower case).
    pub fn block_letter(self) -> char {
        self.0.to_ascii_lowercase() as char
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

impl fmt::Debug for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

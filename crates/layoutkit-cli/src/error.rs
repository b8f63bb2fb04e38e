use std::fmt;

/// An error that is layoutkit's fault rather than the input's: exit status 1.
#[derive(Debug)]
pub struct Internal(pub String);

impl fmt::Display for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "internal error: {}", self.0)
    }
}

impl std::error::Error for Internal {}

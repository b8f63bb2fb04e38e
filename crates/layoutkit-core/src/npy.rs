//! `.npy` files (numpy's format, versions 1.0, 2.0 and 3.0), C order.
//!
//! Reading accepts what numpy writes for the supported types (`<f4 <f2 <f8 |i1 |u1 <i4`, and
//! `<u2` as bf16 bit patterns), in either byte order; data comes back in native little-endian
//! order. Fortran-order arrays (with more than one non-trivial dimension), object and structured
//! arrays, and truncated or over-long files are errors.
//!
//! Writing produces exactly the bytes `numpy.save` produces for the same array.
//!
//! ```
//! use layoutkit_core::{npy, DType};
//! let file = npy::encode(DType::U8, &[2, 3], &[1, 2, 3, 4, 5, 6]).unwrap();
//! let array = npy::decode(&file).unwrap();
//! assert_eq!(array.header.shape, vec![2, 3]);
//! assert_eq!(&*array.data, &[1, 2, 3, 4, 5, 6]);
//! ```

use std::borrow::Cow;

use crate::{DType, Error, Result};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
const ARRAY_ALIGN: usize = 64;
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// What a `.npy` header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Whether the file stores elements big-endian.
    pub big_endian: bool,
    /// Byte offset of the data in the file.
    pub data_offset: usize,
    /// Bytes of data the header promises (elements times element size).
    pub data_bytes: usize,
}

/// A decoded array: its header and its data in native byte order (borrowed when no byte swap
/// was needed).
#[derive(Clone, Debug)]
pub struct NpyArray<'a> {
    pub header: NpyHeader,
    pub data: Cow<'a, [u8]>,
}

fn bad(reason: impl Into<String>) -> Error {
    Error::Npy(reason.into())
}

/// Parses the header at the start of `bytes` (the data need not follow).
pub fn read_header(bytes: &[u8]) -> Result<NpyHeader> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad(
            "not a .npy file (the magic string \\x93NUMPY is missing)",
        ));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => return Err(bad(format!("unsupported .npy version {major}.{minor}"))),
    };
    if bytes.len() < 8 + len_size {
        return Err(bad("file ends inside the header length"));
    }
    let header_len = if len_size == 2 {
        u16::from_le_bytes([bytes[8], bytes[9]]) as usize
    } else {
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    };
    let start = 8 + len_size;
    let data_offset = start
        .checked_add(header_len)
        .ok_or_else(|| bad("header length overflows"))?;
    if bytes.len() < data_offset {
        return Err(bad(format!(
            "file ends inside the header ({} of {} header bytes present)",
            bytes.len() - start,
            header_len
        )));
    }
    let raw = &bytes[start..data_offset];
    let text: String = if utf8 {
        std::str::from_utf8(raw)
            .map_err(|_| bad("header is not UTF-8"))?
            .to_string()
    } else {
        raw.iter().map(|&b| b as char).collect()
    };
    let dict = header_dict::parse(&text)?;
    let (dtype, big_endian) = descr_to_dtype(&dict.descr)?;
    if dict.fortran_order && dict.shape.iter().filter(|&&n| n > 1).count() > 1 {
        return Err(bad(
            "Fortran-order arrays are not supported; save numpy.ascontiguousarray(x) instead",
        ));
    }
    let elements = dict
        .shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .ok_or_else(|| bad(format!("shape {:?} overflows", dict.shape)))?;
    let data_bytes = elements
        .checked_mul(dtype.size_bytes())
        .filter(|&b| isize::try_from(b).is_ok())
        .ok_or_else(|| bad(format!("shape {:?} overflows", dict.shape)))?;
    Ok(NpyHeader {
        dtype,
        shape: dict.shape,
        big_endian,
        data_offset,
        data_bytes,
    })
}

/// Decodes a whole file: header and data, with the data length checked exactly.
pub fn decode(bytes: &[u8]) -> Result<NpyArray<'_>> {
    let header = read_header(bytes)?;
    let available = bytes.len() - header.data_offset;
    if available != header.data_bytes {
        return Err(bad(format!(
            "{} data bytes for shape {:?} of {} need exactly {} ({})",
            available,
            header.shape,
            header.dtype,
            header.data_bytes,
            if available < header.data_bytes {
                "the file is truncated"
            } else {
                "the file has trailing bytes"
            }
        )));
    }
    let raw = &bytes[header.data_offset..];
    let data = if header.big_endian && header.dtype.size_bytes() > 1 {
        let mut owned = raw.to_vec();
        owned
            .chunks_exact_mut(header.dtype.size_bytes())
            .for_each(|c| c.reverse());
        Cow::Owned(owned)
    } else {
        Cow::Borrowed(raw)
    };
    Ok(NpyArray { header, data })
}

fn descr_to_dtype(descr: &str) -> Result<(DType, bool)> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let big_endian = order == '>';
    let dtype = match code {
        "f4" => DType::F32,
        "f2" => DType::F16,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "i4" => DType::I32,
        "u2" => DType::BF16,
        "O" => return Err(bad("object arrays are not supported")),
        _ => {
            return Err(bad(format!(
                "element type `{descr}` is not supported (supported: <f4 <f2 <f8 |i1 |u1 <i4, and <u2 read as bf16)"
            )))
        }
    };
    Ok((dtype, big_endian))
}

/// The header numpy writes for a C-order array of `dtype` and `shape` (version 1.0, or 2.0 when
/// the header does not fit), data offset a multiple of 64.
pub fn header_bytes(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_repr}, }}",
        dtype.npy_descr()
    );
    // numpy leaves room to grow the first axis in place.
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }
    let hlen = dict.len() + 1;
    let pad_for = |len_size: usize| ARRAY_ALIGN - (8 + len_size + hlen) % ARRAY_ALIGN;
    let (version, len_size) = if hlen + pad_for(2) <= u16::MAX as usize {
        (1u8, 2usize)
    } else {
        (2u8, 4usize)
    };
    let pad = pad_for(len_size);
    let total = hlen + pad;
    let mut out = Vec::with_capacity(8 + len_size + total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if len_size == 2 {
        out.extend_from_slice(&(total as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(total as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    out
}

/// A whole `.npy` file: header plus `data` (native little-endian elements).
pub fn encode(dtype: DType, shape: &[usize], data: &[u8]) -> Result<Vec<u8>> {
    let elements = shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .and_then(|e| e.checked_mul(dtype.size_bytes()))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    if elements != data.len() {
        return Err(Error::BufferSize {
            what: format!(".npy data for shape {shape:?} of {dtype}"),
            expected_bytes: elements,
            actual_bytes: data.len(),
        });
    }
    let mut out = header_bytes(dtype, shape);
    out.extend_from_slice(data);
    Ok(out)
}

mod header_dict {
    //! The Python dict literal of a `.npy` header:
    //! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.

    use super::bad;
    use crate::Result;

    pub(super) struct HeaderDict {
        pub descr: String,
        pub fortran_order: bool,
        pub shape: Vec<usize>,
    }

    enum Value {
        Str(String),
        Bool(bool),
        Tuple(Vec<usize>),
        Other,
    }

    struct Cursor<'a> {
        s: &'a [u8],
        pos: usize,
    }

    impl Cursor<'_> {
        fn skip_ws(&mut self) {
            while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
        }
        fn peek(&mut self) -> Option<u8> {
            self.skip_ws();
            self.s.get(self.pos).copied()
        }
        fn expect(&mut self, c: u8) -> Result<()> {
            if self.peek() == Some(c) {
                self.pos += 1;
                Ok(())
            } else {
                Err(bad(format!(
                    "header: expected `{}` at byte {}",
                    c as char, self.pos
                )))
            }
        }
        fn string(&mut self) -> Result<String> {
            let quote = self.peek().ok_or_else(|| bad("header ends early"))?;
            if quote != b'\'' && quote != b'"' {
                return Err(bad(format!(
                    "header: expected a string at byte {}",
                    self.pos
                )));
            }
            self.pos += 1;
            let start = self.pos;
            while self.pos < self.s.len() && self.s[self.pos] != quote {
                self.pos += 1;
            }
            if self.pos >= self.s.len() {
                return Err(bad("header: unterminated string"));
            }
            let text = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
            self.pos += 1;
            Ok(text)
        }
        fn value(&mut self) -> Result<Value> {
            match self.peek() {
                Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
                Some(b'(') => {
                    self.pos += 1;
                    let mut items = Vec::new();
                    loop {
                        match self.peek() {
                            Some(b')') => {
                                self.pos += 1;
                                break;
                            }
                            Some(c) if c.is_ascii_digit() => {
                                let start = self.pos;
                                while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                                    self.pos += 1;
                                }
                                let text =
                                    std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                                let n: usize = text.parse().map_err(|_| {
                                    bad(format!("header: dimension {text} is too large"))
                                })?;
                                // Python 2 long suffix.
                                if self.peek() == Some(b'L') {
                                    self.pos += 1;
                                }
                                items.push(n);
                                match self.peek() {
                                    Some(b',') => self.pos += 1,
                                    Some(b')') => {}
                                    _ => return Err(bad("header: malformed shape tuple")),
                                }
                            }
                            _ => return Err(bad("header: malformed shape tuple")),
                        }
                    }
                    Ok(Value::Tuple(items))
                }
                Some(b'T') if self.s[self.pos..].starts_with(b"True") => {
                    self.pos += 4;
                    Ok(Value::Bool(true))
                }
                Some(b'F') if self.s[self.pos..].starts_with(b"False") => {
                    self.pos += 5;
                    Ok(Value::Bool(false))
                }
                Some(b'[') => Ok(Value::Other),
                _ => Err(bad(format!(
                    "header: unexpected value at byte {}",
                    self.pos
                ))),
            }
        }
    }

    pub(super) fn parse(text: &str) -> Result<HeaderDict> {
        let mut c = Cursor {
            s: text.as_bytes(),
            pos: 0,
        };
        c.expect(b'{')?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        loop {
            if c.peek() == Some(b'}') {
                c.pos += 1;
                break;
            }
            let key = c.string()?;
            c.expect(b':')?;
            let value = c.value()?;
            match (key.as_str(), value) {
                ("descr", Value::Str(s)) => descr = Some(s),
                ("descr", _) => return Err(bad("structured (record) arrays are not supported")),
                ("fortran_order", Value::Bool(b)) => fortran = Some(b),
                ("shape", Value::Tuple(t)) => shape = Some(t),
                (k @ ("fortran_order" | "shape"), _) => {
                    return Err(bad(format!("header: `{k}` has the wrong type")))
                }
                (k, _) => return Err(bad(format!("header: unexpected key `{k}`"))),
            }
            match c.peek() {
                Some(b',') => c.pos += 1,
                Some(b'}') => {}
                _ => return Err(bad("header: expected `,` or `}`")),
            }
        }
        let rest = &text.as_bytes()[c.pos..];
        if rest.iter().any(|b| !b.is_ascii_whitespace()) {
            return Err(bad("header: text after the dictionary"));
        }
        Ok(HeaderDict {
            descr: descr.ok_or_else(|| bad("header has no `descr`"))?,
            fortran_order: fortran.ok_or_else(|| bad("header has no `fortran_order`"))?,
            shape: shape.ok_or_else(|| bad("header has no `shape`"))?,
        })
    }
}

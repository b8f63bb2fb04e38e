//! The protobuf wire format, read by hand: the few ONNX messages the packer needs are walked
//! field by field, and unknown fields are skipped, so any ONNX version reads.

/// One field's value.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// Length-delimited bytes and their offset in the whole file (for zero-copy weights).
    Bytes {
        data: &'a [u8],
        offset: usize,
    },
}

/// Walks the fields of one message.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` in the whole file.
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, which starts at `base` in the file.
    pub fn new(buf: &'a [u8], base: usize) -> Reader<'a> {
        Reader { buf, pos: 0, base }
    }

    /// A reader over a length-delimited field's bytes.
    pub fn of(data: &'a [u8], offset: usize) -> Reader<'a> {
        Reader::new(data, offset)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or_else(|| self.cut("a varint"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!(
            "varint longer than 10 bytes at byte {}",
            self.base + self.pos
        ))
    }

    fn cut(&self, what: &str) -> String {
        format!(
            "the protobuf ends inside {what} at byte {} (truncated file?)",
            self.base + self.pos
        )
    }

    fn take(&mut self, n: usize) -> Result<(&'a [u8], usize), String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.cut(&format!("a field of {n} bytes")))?;
        let out = (&self.buf[self.pos..end], self.base + self.pos);
        self.pos = end;
        Ok(out)
    }

    /// The next field `(number, value)`, or `None` at the end of the message.
    pub fn next_field(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let (b, _) = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            }
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| self.cut("a length"))?;
                let (data, offset) = self.take(len)?;
                Value::Bytes { data, offset }
            }
            5 => {
                let (b, _) = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
            }
            w => {
                return Err(format!(
                    "unsupported protobuf wire type {w} at byte {} (not an ONNX file?)",
                    self.base + self.pos
                ))
            }
        };
        Ok(Some((field, value)))
    }
}

/// The varints of a packed repeated field.
pub fn packed_varints(data: &[u8], offset: usize) -> Result<Vec<u64>, String> {
    let mut r = Reader::new(data, offset);
    let mut out = Vec::new();
    while r.pos < data.len() {
        out.push(r.varint()?);
    }
    Ok(out)
}

/// A string field's text.
pub fn string(value: Value<'_>) -> Result<String, String> {
    match value {
        Value::Bytes { data, .. } => {
            String::from_utf8(data.to_vec()).map_err(|_| "a string field is not UTF-8".to_string())
        }
        _ => Err("a string field has the wrong wire type".into()),
    }
}

/// A repeated integer field: one varint, or a packed run of them.
pub fn push_ints(value: Value<'_>, out: &mut Vec<i64>) -> Result<(), String> {
    match value {
        Value::Varint(v) => out.push(v as i64),
        Value::Bytes { data, offset } => {
            out.extend(packed_varints(data, offset)?.into_iter().map(|v| v as i64))
        }
        _ => return Err("an integer field has the wrong wire type".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_varints_and_bytes() {
        // field 1 varint 300, field 2 bytes "hi", field 5 fixed32 1.0f
        let mut buf = vec![0x08, 0xac, 0x02, 0x12, 2, b'h', b'i', 0x2d];
        buf.extend_from_slice(&1.0f32.to_le_bytes());
        let mut r = Reader::new(&buf, 10);
        assert!(matches!(r.next_field(), Ok(Some((1, Value::Varint(300))))));
        match r.next_field() {
            Ok(Some((2, Value::Bytes { data, offset }))) => {
                assert_eq!(data, b"hi");
                assert_eq!(offset, 15);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.next_field(),
            Ok(Some((5, Value::Fixed32(0x3f80_0000))))
        ));
        assert!(matches!(r.next_field(), Ok(None)));
    }

    #[test]
    fn truncated_field_is_an_error() {
        let buf = [0x12, 5, b'a'];
        let mut r = Reader::new(&buf, 0);
        assert!(r.next_field().unwrap_err().contains("truncated"));
    }
}

use layoutkit_core::DType;

/// The element types a model file can hold: those of safetensors (a superset of what the
/// converters take). Tensors of a type without a [`DType`] (`i64` shapes, `bool` masks, fp8)
/// are stored unchanged.
///
/// ```
/// use layoutkit_model::ElementType;
/// let t = ElementType::from_safetensors("BF16").unwrap();
/// assert_eq!(t.size_bytes(), 2);
/// assert_eq!(t.core(), Some(layoutkit_core::DType::BF16));
/// assert_eq!(ElementType::I64.core(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    Bool,
    F8E4M3,
    F8E5M2,
}

impl ElementType {
    const ALL: [ElementType; 15] = [
        ElementType::F64,
        ElementType::F32,
        ElementType::F16,
        ElementType::BF16,
        ElementType::I64,
        ElementType::I32,
        ElementType::I16,
        ElementType::I8,
        ElementType::U64,
        ElementType::U32,
        ElementType::U16,
        ElementType::U8,
        ElementType::Bool,
        ElementType::F8E4M3,
        ElementType::F8E5M2,
    ];

    /// The name in a safetensors header: `F32`, `BF16`, `BOOL`, `F8_E4M3`, ...
    pub fn safetensors_name(self) -> &'static str {
        match self {
            ElementType::F64 => "F64",
            ElementType::F32 => "F32",
            ElementType::F16 => "F16",
            ElementType::BF16 => "BF16",
            ElementType::I64 => "I64",
            ElementType::I32 => "I32",
            ElementType::I16 => "I16",
            ElementType::I8 => "I8",
            ElementType::U64 => "U64",
            ElementType::U32 => "U32",
            ElementType::U16 => "U16",
            ElementType::U8 => "U8",
            ElementType::Bool => "BOOL",
            ElementType::F8E4M3 => "F8_E4M3",
            ElementType::F8E5M2 => "F8_E5M2",
        }
    }

    /// The type of a safetensors header name.
    pub fn from_safetensors(name: &str) -> Option<ElementType> {
        ElementType::ALL
            .into_iter()
            .find(|t| t.safetensors_name() == name)
    }

    /// The short lower-case name used in tables and metadata: `f32`, `i64`, `bool`, ...
    pub fn name(self) -> &'static str {
        match self.core() {
            Some(d) => d.name(),
            None => match self {
                ElementType::I64 => "i64",
                ElementType::I16 => "i16",
                ElementType::U64 => "u64",
                ElementType::U32 => "u32",
                ElementType::U16 => "u16",
                ElementType::Bool => "bool",
                ElementType::F8E4M3 => "f8e4m3",
                _ => "f8e5m2",
            },
        }
    }

    /// The type of a short name (as [`ElementType::name`] writes it).
    pub fn from_name(name: &str) -> Option<ElementType> {
        ElementType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            ElementType::F64 | ElementType::I64 | ElementType::U64 => 8,
            ElementType::F32 | ElementType::I32 | ElementType::U32 => 4,
            ElementType::F16 | ElementType::BF16 | ElementType::I16 | ElementType::U16 => 2,
            _ => 1,
        }
    }

    /// The converters' element type, where they have one.
    pub fn core(self) -> Option<DType> {
        Some(match self {
            ElementType::F64 => DType::F64,
            ElementType::F32 => DType::F32,
            ElementType::F16 => DType::F16,
            ElementType::BF16 => DType::BF16,
            ElementType::I32 => DType::I32,
            ElementType::I8 => DType::I8,
            ElementType::U8 => DType::U8,
            _ => return None,
        })
    }

    /// Whether the converters can cast this type (a float type they know).
    pub fn is_core_float(self) -> bool {
        self.core().is_some_and(DType::is_float)
    }

    /// The element type of a converters' type.
    pub fn from_core(dtype: DType) -> ElementType {
        match dtype {
            DType::F64 => ElementType::F64,
            DType::F32 => ElementType::F32,
            DType::F16 => ElementType::F16,
            DType::BF16 => ElementType::BF16,
            DType::I32 => ElementType::I32,
            DType::I8 => ElementType::I8,
            DType::U8 => ElementType::U8,
        }
    }

    /// The type of an ONNX `TensorProto.DataType` code (`None` for strings, complex numbers and
    /// codes this build does not know).
    pub fn from_onnx(code: i64) -> Option<ElementType> {
        Some(match code {
            1 => ElementType::F32,
            2 => ElementType::U8,
            3 => ElementType::I8,
            4 => ElementType::U16,
            5 => ElementType::I16,
            6 => ElementType::I32,
            7 => ElementType::I64,
            9 => ElementType::Bool,
            10 => ElementType::F16,
            11 => ElementType::F64,
            12 => ElementType::U32,
            13 => ElementType::U64,
            16 => ElementType::BF16,
            17 => ElementType::F8E4M3,
            19 => ElementType::F8E5M2,
            _ => return None,
        })
    }
}

impl std::fmt::Display for ElementType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

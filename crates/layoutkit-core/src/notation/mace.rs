//! MACE's OpenCL image buffer types (`mace-image-layouts.md` section 1) as image layouts, and
//! the image notation `ROWS|COLUMNS|LANES` they print as.

use crate::{Error, Layout, Result, Token, Transform};

/// `(MACE enum name, our name, image notation, description)`.
pub(crate) const MACE_TYPES: &[(&str, &str, &str, &str)] = &[
    (
        "IN_OUT_CHANNEL",
        "mace:in_out_channel",
        "NH|CW|4c",
        "MACE default activation image: [ceil(C/4)*W, N*H], lanes = 4 channels",
    ),
    (
        "IN_OUT_HEIGHT",
        "mace:in_out_height",
        "NH|CW|4h",
        "MACE Winograd/MatMul activation image: [W*C, N*ceil(H/4)], lanes = 4 rows",
    ),
    (
        "IN_OUT_WIDTH",
        "mace:in_out_width",
        "NH|CW|4w",
        "MACE MatMul operand image: [ceil(W/4)*C, N*H], lanes = 4 columns",
    ),
    (
        "CONV2D_FILTER",
        "mace:conv2d_filter",
        "OHW|I|4o",
        "MACE conv filter image: [I, ceil(O/4)*KH*KW], lanes = 4 output channels",
    ),
    (
        "CONV2D_FILTER",
        "mace:conv2d_filter:v0.6",
        "OHW|I4i|4o",
        "MACE v0.6 conv filter image (older docs): width I rounded up to 4, zero filled",
    ),
    (
        "DW_CONV2D_FILTER",
        "mace:dw_conv2d_filter",
        "I|MHW|4i",
        "MACE depthwise filter image: [M*KH*KW, ceil(I/4)], lanes = 4 input channels",
    ),
    (
        "ARGUMENT",
        "mace:argument",
        "|W|4w",
        "MACE 1-D argument image (bias, scale): [ceil(L/4), 1]",
    ),
    (
        "WEIGHT_HEIGHT",
        "mace:weight_height",
        "O|HWI|4o",
        "MACE FC weight image: [I*KH*KW, ceil(O/4)], lanes = 4 output channels",
    ),
    (
        "WEIGHT_WIDTH",
        "mace:weight_width",
        "O|HWI|4i",
        "MACE FC weight image: [ceil(I/4)*KH*KW, O], lanes = 4 input channels",
    ),
    (
        "WINOGRAD_FILTER",
        "mace:winograd_filter:2",
        "winograd2:TO|I|4i",
        "MACE Winograd F(2x2,3x3) filter: U = G g G^T, image [ceil(I/4), 16*O]",
    ),
    (
        "WINOGRAD_FILTER",
        "mace:winograd_filter:4",
        "winograd4:TO|I|4i",
        "MACE Winograd F(4x4,3x3) filter: U = G g G^T, image [ceil(I/4), 36*O]",
    ),
];

/// Whether `name` names a MACE buffer type (`mace:...` or an enum name).
pub(crate) fn is_mace_name(name: &str) -> bool {
    name.to_ascii_lowercase().starts_with("mace:")
        || MACE_TYPES
            .iter()
            .any(|(e, ..)| name.split(':').next() == Some(*e))
}

/// A MACE name -> its image layout. Accepts `mace:in_out_channel`, `mace:IN_OUT_CHANNEL`,
/// `IN_OUT_CHANNEL`; the Winograd filter takes its block size after a colon (default 2, as
/// MACE's `CalImage2DShape`).
pub(crate) fn parse(name: &str) -> Result<Layout> {
    let lower = name.to_ascii_lowercase();
    let bare = lower.strip_prefix("mace:").unwrap_or(&lower);
    let mut key = format!("mace:{bare}");
    if key == "mace:winograd_filter" {
        key.push_str(":2");
    }
    let hit = MACE_TYPES.iter().find(|(_, n, ..)| *n == key);
    match hit {
        Some((_, _, notation, _)) => super::parse_format(notation).map_err(|e| match e {
            Error::Format { reason, .. } => Error::Format {
                input: name.to_string(),
                reason,
            },
            other => other,
        }),
        None => Err(Error::Format {
            input: name.to_string(),
            reason: format!(
                "unknown MACE buffer type; known: {}",
                MACE_TYPES
                    .iter()
                    .map(|(_, n, ..)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// The image notation `ROWS|COLUMNS|LANES` (each part in the letter grammar; ROWS may be
/// empty), optionally prefixed `winograd2:` or `winograd4:`.
pub(crate) fn parse_image(name: &str) -> Result<Layout> {
    let err = |reason: String| Error::Format {
        input: name.to_string(),
        reason,
    };
    let (transform, body) = match name.split_once(':') {
        Some((prefix, rest)) => {
            let block = match prefix {
                "winograd2" => 2,
                "winograd4" => 4,
                _ => {
                    return Err(err(format!(
                        "unknown transform `{prefix}` (winograd2 or winograd4)"
                    )))
                }
            };
            (Some(Transform::WinogradFilter { block }), rest)
        }
        None => (None, name),
    };
    let parts: Vec<&str> = body.split('|').collect();
    let [rows, columns, lanes] = parts[..] else {
        return Err(err(
            "an image layout is ROWS|COLUMNS|LANES, e.g. NH|CW|4c".into()
        ));
    };
    let tokens = |part: &str| -> Result<Vec<Token>> {
        if part.is_empty() {
            return Ok(Vec::new());
        }
        super::letters::tokens(part).map_err(&err)
    };
    let lanes_tokens = tokens(lanes)?;
    let [lane] = lanes_tokens[..] else {
        return Err(err(format!(
            "the lanes `{lanes}` must be one block of 4, e.g. 4c"
        )));
    };
    let layout = Layout::image_layout(name, tokens(rows)?, tokens(columns)?, lane)?;
    match transform {
        None => Ok(layout),
        Some(t) => {
            if layout.axes_string().len() != 3
                || !["T", "O", "I"]
                    .iter()
                    .all(|a| layout.axes_string().contains(a))
            {
                return Err(err(
                    "a Winograd filter image has axes T (tile position), O and I".into(),
                ));
            }
            Ok(layout.with_transform(t))
        }
    }
}

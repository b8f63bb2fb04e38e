//! The built-in example: one small tensor in several layouts, where one element lives in each,
//! a TensorRT sizing example, and a self-check of the converters on the example.

use anyhow::{ensure, Result};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout};

const FORMATS: &[&str] = &["NCHW", "NHWC", "kHWC8", "NC/4HW4", "nChw2c"];

pub fn run() -> Result<()> {
    let dims = Dims::parse("N=1,C=3,H=2,W=2")?;
    let nchw = parse_format("NCHW")?.shaped(&dims)?;
    // Value 100*c + 10*h + w, so each element names its own coordinate.
    let values: Vec<i32> = (0..nchw.elements())
        .map(|o| {
            let c = nchw.inverse(o).ok().flatten().unwrap_or_default();
            (100 * c[1] + 10 * c[2] + c[3]) as i32
        })
        .collect();
    let src: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let id = CastSpec::identity(DType::I32);

    outln!("layoutkit: where every element of a tensor lives, and how to move it.\n");
    outln!("A tensor with dims {dims}; element (c, h, w) holds 100c + 10h + w; `.` is padding.\n");
    let probe = [0usize, 2, 1, 0]; // n, c, h, w in NCHW order
    for name in FORMATS {
        let dst = parse_format(name)?.shaped(&dims)?;
        let out = layoutkit_cpu::convert(&nchw, &src, &dst, &id)?;
        let perm = nchw.axis_permutation_to(&dst);
        let mut coord = vec![0; 4];
        for (i, &c) in probe.iter().enumerate() {
            coord[perm[i]] = c;
        }
        outln!(
            "{name} = {}, physical array {}, element 210 at offset {}:",
            dst.layout(),
            super::list(&dst.physical_shape()),
            dst.forward(&coord)?
        );
        // Rows: the innermost dimensions, at least 4 elements wide.
        let mut row = 1;
        for &n in dst.physical_shape().iter().rev() {
            if row >= 4 {
                break;
            }
            row *= n;
        }
        let mut line = String::from("   ");
        for o in 0..dst.elements() {
            let v =
                i32::from_le_bytes([out[4 * o], out[4 * o + 1], out[4 * o + 2], out[4 * o + 3]]);
            let cell = match dst.inverse(o)? {
                Some(_) => v.to_string(),
                None => ".".into(),
            };
            line.push_str(&format!(" {cell:>3}"));
            if (o + 1) % row == 0 {
                outln!("{line}");
                line = String::from("   ");
            }
        }
    }

    let khwc8 = parse_format("kHWC8")?.shaped(&Dims::parse("N=16,C=3,H=224,W=224")?)?;
    outln!(
        "\nTensorRT kHWC8 for a 16x3x224x224 f16 input: {} elements, {} bytes ({:.2}x the logical size).",
        khwc8.elements(),
        khwc8.bytes(DType::F16)?,
        khwc8.elements() as f64 / khwc8.logical_elements() as f64
    );

    let checked = self_check(&nchw, &src)?;
    outln!(
        "Self-check: NCHW -> {checked} formats -> NCHW on this tensor: planned == reference, round trips exact."
    );
    outln!(
        "\nNext: layoutkit formats | layoutkit describe kHWC8 --dims N=16,C=3,H=224,W=224 --dtype f16\n      layoutkit locate NC/32HW32 --dims N=2,C=40,H=7,W=7 --coord N=1,C=35,H=2,W=3\n      layoutkit convert in.npy out.npy --from NCHW --to NC/32HW32      (layoutkit --help for more)"
    );
    Ok(())
}

/// Converts the example to every catalogued activation format with both engines and back.
fn self_check(nchw: &ShapedLayout, src: &[u8]) -> Result<usize> {
    let id = CastSpec::identity(DType::I32);
    let dims = nchw.dims();
    let mut n = 0;
    for entry in layoutkit_core::formats::catalogue()? {
        let layout = parse_format(&entry.name)?;
        if !layout.same_axes(nchw.layout()) {
            continue;
        }
        let dst = layout.shaped(&dims)?;
        let planned = layoutkit_cpu::convert(nchw, src, &dst, &id)?;
        let mut reference = vec![0u8; planned.len()];
        layoutkit_cpu::convert_reference(nchw, src, &dst, &mut reference, &id)?;
        ensure!(
            planned == reference,
            crate::error::Internal(format!("planned != reference for {}", entry.name))
        );
        let plan = ConversionPlan::new(&dst, nchw)?;
        let mut back = vec![0u8; src.len()];
        layoutkit_cpu::convert_planned(&plan, &planned, &mut back, &id)?;
        ensure!(
            back == src,
            crate::error::Internal(format!("round trip through {} differs", entry.name))
        );
        n += 1;
    }
    Ok(n)
}

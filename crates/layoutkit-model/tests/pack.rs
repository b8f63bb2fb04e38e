//! Packs model files written here (safetensors through the crate's own header writer, ONNX
//! through a small protobuf encoder) with every profile: the fast engine's file must equal, byte
//! for byte, the one the reference converter writes; unpack must restore the source.

use std::path::Path;

use layoutkit_core::DType;
use layoutkit_model::safetensors::{header, HeaderEntry};
use layoutkit_model::{
    pack_model, unpack_model, ElementType, Engine, Error, PackOptions, Profile, Rule, Source,
    UnpackOptions,
};

/// xorshift floats in [-2, 2).
fn floats(n: usize, seed: &mut u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// (name, dtype, shape, bytes)
type Tensor = (String, ElementType, Vec<usize>, Vec<u8>);

fn write_safetensors(path: &Path, tensors: &[Tensor]) {
    let entries: Vec<HeaderEntry> = tensors
        .iter()
        .map(|(n, t, s, _)| HeaderEntry {
            name: n.clone(),
            dtype: *t,
            shape: s.clone(),
        })
        .collect();
    let (mut bytes, _) = header(&[("format".into(), "pt".into())], &entries);
    for (_, _, _, b) in tensors {
        bytes.extend_from_slice(b);
    }
    std::fs::write(path, bytes).unwrap();
}

fn torch_like(seed: &mut u64) -> Vec<Tensor> {
    let mut t = Vec::new();
    let mut f = |name: &str, shape: Vec<usize>| {
        let n = shape.iter().product();
        t.push((
            name.to_string(),
            ElementType::F32,
            shape,
            f32_bytes(&floats(n, seed)),
        ));
    };
    f("conv.weight", vec![20, 6, 3, 3]);
    f("conv.bias", vec![20]);
    f("dw.weight", vec![20, 1, 3, 3]);
    f("grp.weight", vec![24, 5, 1, 1]);
    f("up.weight", vec![20, 7, 2, 2]);
    f("fc.weight", vec![10, 20]);
    f("fc.bias", vec![10]);
    f("norm.weight", vec![20]);
    let ids: Vec<u8> = (0..6i64).flat_map(|v| v.to_le_bytes()).collect();
    t.push(("ids".into(), ElementType::I64, vec![2, 3], ids));
    t
}

fn rules() -> Vec<Rule> {
    [
        "dw.weight=depthwise",
        "grp.weight=grouped:4",
        "up.weight=deconv",
    ]
    .iter()
    .map(|r| Rule::parse(r).unwrap())
    .collect()
}

// --- a minimal protobuf writer for ONNX ---

fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn field_bytes(field: u64, data: &[u8], out: &mut Vec<u8>) {
    varint(field << 3 | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

fn field_varint(field: u64, v: u64, out: &mut Vec<u8>) {
    varint(field << 3, out);
    varint(v, out);
}

fn tensor_proto(name: &str, dims: &[usize], data: &[f32], raw: bool) -> Vec<u8> {
    let mut t = Vec::new();
    for &d in dims {
        field_varint(1, d as u64, &mut t);
    }
    field_varint(2, 1, &mut t); // FLOAT
    field_bytes(8, name.as_bytes(), &mut t);
    if raw {
        field_bytes(9, &f32_bytes(data), &mut t);
    } else {
        field_bytes(4, &f32_bytes(data), &mut t); // packed float_data
    }
    t
}

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str], ints: &[(&str, i64)]) -> Vec<u8> {
    let mut n = Vec::new();
    for i in inputs {
        field_bytes(1, i.as_bytes(), &mut n);
    }
    for o in outputs {
        field_bytes(2, o.as_bytes(), &mut n);
    }
    field_bytes(3, name.as_bytes(), &mut n);
    field_bytes(4, op.as_bytes(), &mut n);
    for (k, v) in ints {
        let mut a = Vec::new();
        field_bytes(1, k.as_bytes(), &mut a);
        field_varint(3, *v as u64, &mut a);
        field_varint(20, 2, &mut a); // INT
        field_bytes(5, &a, &mut n);
    }
    n
}

/// Conv (3x3, bias), depthwise Conv (group 8), Gemm (transB = 1, C), MatMul + Add.
fn write_onnx(path: &Path, seed: &mut u64) -> Vec<(String, Vec<usize>)> {
    let weights: Vec<(&str, Vec<usize>, bool)> = vec![
        ("c.w", vec![8, 3, 3, 3], true),
        ("c.b", vec![8], false),
        ("dw.w", vec![8, 1, 3, 3], true),
        ("fc.w", vec![5, 8], false),
        ("fc.b", vec![5], true),
        ("mm.w", vec![5, 6], true),
        ("mm.b", vec![6], true),
    ];
    let mut g = Vec::new();
    for n in [
        node("Conv", "c", &["x", "c.w", "c.b"], &["y1"], &[]),
        node("Conv", "dw", &["y1", "dw.w"], &["y2"], &[("group", 8)]),
        node(
            "Gemm",
            "fc",
            &["y2", "fc.w", "fc.b"],
            &["y3"],
            &[("transB", 1)],
        ),
        node("MatMul", "mm", &["y3", "mm.w"], &["y4"], &[]),
        node("Add", "add", &["y4", "mm.b"], &["y"], &[]),
    ] {
        field_bytes(1, &n, &mut g);
    }
    for (name, shape, raw) in &weights {
        let data = floats(shape.iter().product(), seed);
        field_bytes(5, &tensor_proto(name, shape, &data, *raw), &mut g);
    }
    let mut m = Vec::new();
    field_varint(1, 8, &mut m);
    field_bytes(7, &g, &mut m);
    std::fs::write(path, m).unwrap();
    weights
        .into_iter()
        .map(|(n, s, _)| (n.to_string(), s))
        .collect()
}

fn variants(p: Profile) -> Vec<(Option<DType>, Option<u8>)> {
    match p {
        Profile::MaceGpu => vec![(Some(DType::F16), None), (Some(DType::F32), Some(2))],
        Profile::OnednnAvx512 => vec![(None, None), (Some(DType::I8), None)],
        _ => vec![(None, None)],
    }
}

/// Packs `model` with every profile, fast and reference, and unpacks.
fn check_model(dir: &Path, model: &Path, rules: Vec<Rule>) {
    let src = Source::open(model).unwrap();
    for profile in Profile::ALL {
        for (dtype, winograd) in variants(profile) {
            let mut opts = PackOptions::new(profile);
            opts.dtype = dtype;
            opts.winograd = winograd;
            opts.rules = rules.clone();
            opts.sync = false;
            let fast = dir.join(format!("{profile}.{dtype:?}.{winograd:?}.fast"));
            let reference = dir.join(format!("{profile}.{dtype:?}.{winograd:?}.ref"));
            let report = pack_model(model, &fast, &opts).unwrap();
            assert_eq!(report.shards[0].tensors.len(), src.tensors.len());
            opts.engine = Engine::Reference;
            opts.threads = 1;
            pack_model(model, &reference, &opts).unwrap();
            assert!(
                std::fs::read(&fast).unwrap() == std::fs::read(&reference).unwrap(),
                "{profile} {dtype:?}: fast and reference packs differ"
            );
            let back = dir.join(format!("{profile}.{dtype:?}.{winograd:?}.back"));
            unpack_model(&fast, &back, &UnpackOptions::default()).unwrap();
            let restored = Source::open(&back).unwrap();
            assert_eq!(restored.tensors.len(), src.tensors.len());
            let lossless = dtype.or(profile.default_dtype()).is_none()
                || (dtype == Some(DType::F32) && winograd.is_none());
            for t in &src.tensors {
                let r = restored.tensors.iter().find(|r| r.name == t.name).unwrap();
                assert_eq!((r.dtype, &r.shape), (t.dtype, &t.shape), "{}", t.name);
                if lossless || t.dtype == ElementType::I64 {
                    assert!(
                        src.data(t) == restored.data(r),
                        "{profile}: {} not restored",
                        t.name
                    );
                } else {
                    let a: Vec<f32> = src
                        .data(t)
                        .chunks(4)
                        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                        .collect();
                    let b: Vec<f32> = restored
                        .data(r)
                        .chunks(4)
                        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                        .collect();
                    let err = a
                        .iter()
                        .zip(&b)
                        .map(|(x, y)| (x - y).abs())
                        .fold(0f32, f32::max);
                    assert!(
                        err <= 2.0 / 127.0 * 1.01,
                        "{profile} {dtype:?} {}: error {err}",
                        t.name
                    );
                }
            }
        }
    }
}

#[test]
fn safetensors_every_profile_fast_equals_reference_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    write_safetensors(&model, &torch_like(&mut 7));
    check_model(dir.path(), &model, rules());
}

#[test]
fn onnx_roles_come_from_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    write_onnx(&model, &mut 11);
    let mut opts = PackOptions::new(Profile::MaceGpu);
    opts.dry_run = true;
    opts.winograd = Some(2);
    let report = pack_model(&model, Path::new("unused"), &opts).unwrap();
    let role = |n: &str| {
        let t = report.shards[0]
            .tensors
            .iter()
            .find(|t| t.name == n)
            .unwrap();
        (t.role.clone(), t.target_layout.clone())
    };
    assert_eq!(
        role("c.w"),
        ("conv".into(), "mace:winograd_filter:2".into())
    );
    assert_eq!(role("c.b"), ("bias".into(), "mace:argument".into()));
    assert_eq!(
        role("dw.w"),
        ("depthwise".into(), "mace:dw_conv2d_filter".into())
    );
    assert_eq!(role("fc.w"), ("dense".into(), "mace:weight_width".into()));
    assert_eq!(
        role("mm.w"),
        ("dense-io".into(), "mace:weight_width".into())
    );
    assert_eq!(role("mm.b"), ("bias".into(), "mace:argument".into()));
    assert!(!Path::new("unused").exists());
    check_model(dir.path(), &model, Vec::new());
}

#[test]
fn bad_inputs_have_clear_errors_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    write_safetensors(&model, &torch_like(&mut 3));
    let out = dir.path().join("out.safetensors");
    let opts = PackOptions::new(Profile::CudnnNhwc);
    // Without the rules, [20, 1, 3, 3] is ambiguous.
    let e = pack_model(&model, &out, &opts).unwrap_err();
    assert!(
        matches!(&e, Error::AmbiguousRole { tensor, .. } if tensor == "dw.weight"),
        "{e}"
    );
    assert!(
        e.to_string().contains("--rule 'dw.weight=depthwise'"),
        "{e}"
    );
    // Truncated.
    let bytes = std::fs::read(&model).unwrap();
    let cut = dir.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let e = pack_model(&cut, &out, &opts).unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
    std::fs::write(&cut, &bytes[..5]).unwrap();
    let e = pack_model(&cut, &out, &opts).unwrap_err().to_string();
    assert!(e.contains("too short"), "{e}");
    let onnx = dir.path().join("m.onnx");
    write_onnx(&onnx, &mut 5);
    let b = std::fs::read(&onnx).unwrap();
    std::fs::write(&onnx, &b[..b.len() / 2]).unwrap();
    let e = pack_model(&onnx, &out, &opts).unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
    // Unknown profile, bad rules, Winograd outside MACE.
    assert!("nope"
        .parse::<Profile>()
        .unwrap_err()
        .to_string()
        .contains("unknown profile `nope`"));
    assert!(Rule::parse("dw.weight").is_err());
    let mut o = PackOptions::new(Profile::CudnnNhwc);
    o.winograd = Some(2);
    assert!(pack_model(&model, &out, &o)
        .unwrap_err()
        .to_string()
        .contains("mace-gpu"));
    // A rule whose layout does not fit the role.
    let mut o = PackOptions::new(Profile::CudnnNhwc);
    o.rules = rules();
    o.rules.insert(0, Rule::parse("fc.weight=NCHW").unwrap());
    let e = pack_model(&model, &out, &o).unwrap_err().to_string();
    assert!(
        e.contains("fc.weight") && e.contains("has axes NCHW"),
        "{e}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".layoutkit-") || n == "out.safetensors")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn sharded_checkpoint_one_output_shard_per_input_shard() {
    let dir = tempfile::tempdir().unwrap();
    let tensors = torch_like(&mut 9);
    let (a, b) = tensors.split_at(4);
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    write_safetensors(&ckpt.join("s1.safetensors"), a);
    write_safetensors(&ckpt.join("s2.safetensors"), b);
    let map: serde_json::Map<String, serde_json::Value> = a
        .iter()
        .map(|t| (t.0.clone(), "s1.safetensors".into()))
        .chain(b.iter().map(|t| (t.0.clone(), "s2.safetensors".into())))
        .collect();
    let index = ckpt.join("model.safetensors.index.json");
    std::fs::write(
        &index,
        serde_json::json!({"metadata": {}, "weight_map": map}).to_string(),
    )
    .unwrap();
    let mut opts = PackOptions::new(Profile::OnednnAvx2);
    opts.rules = rules();
    opts.dtype = Some(DType::I8);
    let out = dir.path().join("packed");
    let report = pack_model(&index, &out, &opts).unwrap();
    assert_eq!(report.shards.len(), 2);
    let idx: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    assert_eq!(idx["weight_map"]["conv.weight:scale"], "s1.safetensors");
    assert_eq!(idx["weight_map"]["fc.weight"], "s2.safetensors");
    let back = dir.path().join("back");
    unpack_model(&out, &back, &UnpackOptions::default()).unwrap();
    let idx: serde_json::Value =
        serde_json::from_slice(&std::fs::read(back.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    assert_eq!(idx["weight_map"].as_object().unwrap().len(), tensors.len());
    // A shard the index names but that lacks its tensor.
    let mut bad = map.clone();
    bad.insert("conv.weight".into(), "s2.safetensors".into());
    std::fs::write(&index, serde_json::json!({"weight_map": bad}).to_string()).unwrap();
    let e = pack_model(&index, &dir.path().join("p2"), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("conv.weight") && e.contains("s2.safetensors"),
        "{e}"
    );
}

#[test]
fn empty_scalar_and_bool_tensors_pack_and_unpack() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("edge.safetensors");
    write_safetensors(
        &model,
        &[
            ("empty.weight".into(), ElementType::F32, vec![0, 4], vec![]),
            ("scalar".into(), ElementType::F32, vec![], f32_bytes(&[3.5])),
            ("mask".into(), ElementType::Bool, vec![3], vec![1, 0, 1]),
            (
                "zero.weight".into(),
                ElementType::F32,
                vec![4, 3, 3, 3],
                vec![0; 4 * 27 * 4],
            ),
        ],
    );
    for profile in Profile::ALL {
        let mut opts = PackOptions::new(profile);
        opts.sync = false;
        let packed = dir.path().join(format!("{profile}.packed"));
        pack_model(&model, &packed, &opts).unwrap();
        let back = dir.path().join(format!("{profile}.back"));
        unpack_model(&packed, &back, &UnpackOptions::default()).unwrap();
        let (a, b) = (Source::open(&model).unwrap(), Source::open(&back).unwrap());
        for t in &a.tensors {
            let r = b.tensors.iter().find(|r| r.name == t.name).unwrap();
            assert_eq!((r.dtype, &r.shape), (t.dtype, &t.shape));
            assert!(a.data(t) == b.data(r), "{profile}: {}", t.name);
        }
    }
}

//! Every test vector of `autotvm-itervar-features.md` section 8 (outputs of TVM's C++ extractor).

mod common;

use common::{assert_rows, features_of, features_of_program, features_with};
use layoutkit_loopir::builder::Builder;
use layoutkit_loopir::features::{curve_sample, flatten_f32, flatten_f64, flatten_names, take_log};
use layoutkit_loopir::ir::{DataType, ForKind};

const UNIT_GEMM: &str = "
for (y, 0, 128) {
  for (x, 0, 128) {
    for (k, 0, 128) {
      C[((y*128) + x)] = (C[((y*128) + x)] + (A[((y*128) + k)]*B[((k*128) + x)]))
    }
  }
}";

#[test]
fn s8_1_unit_test_gemm() {
    assert_rows(
        &features_of(UNIT_GEMM),
        &[
            "y: 128 1 128 2097152 SERIAL arith=[0,0,0]  A_0[128,-1,16384,128,0,0] B_0[0,-1,16384,128,0,0] C_0[128,-1,16384,128,0,0] C_1[128,-1,16384,128,0,0]",
            "x: 128 2 16384 16384 SERIAL arith=[0,0,0]  A_0[0,-1,128,128,0,0] B_0[1,-1,16384,1,0,0] C_0[1,-1,128,128,0,0] C_1[1,-1,128,128,0,0]",
            "k: 128 3 2097152 128 SERIAL arith=[1,1,0]  A_0[1,-1,128,1,0,0] B_0[128,-1,128,1,0,0] C_0[0,-1,1,128,0,0] C_1[0,-1,1,128,0,0]",
        ],
    );
    let f = features_of(UNIT_GEMM);
    assert_eq!(
        f.rows[0].attr(),
        [128, 1, 128, 2097152, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]
    );
}

const SEED_GEMM: &str = "
for (x, 0, 128) {
  for (y, 0, 128) {
    C[((x*128) + y)] = 0.000000f
    for (k, 0, 128) {
      C[((x*128) + y)] = (C[((x*128) + y)] + (A[((x*128) + k)]*B[(y + (k*128))]))
    }
  }
}";

#[test]
fn s8_2_seed_gemm_with_init() {
    let f = features_of(SEED_GEMM);
    assert_rows(
        &f,
        &[
            "x: 128 1 128 2097152 SERIAL arith=[0,0,0] A_0[128,-1,16384,128,0,0] B_0[0,-1,16384,128,0,0] C_0[128,-1,16384,1,0,0] C_1[128,-1,16384,128,0,0] C_2[128,-1,16384,128,0,0]",
            "y: 128 2 16384 16384 SERIAL arith=[0,0,0] A_0[0,-1,128,128,0,0] B_0[1,-1,16384,1,0,0] C_0[1,-1,128,1,0,0] C_1[1,-1,128,128,0,0] C_2[1,-1,128,128,0,0]",
            "k: 128 3 2097152 128 SERIAL arith=[1,1,0] A_0[1,-1,128,1,0,0] B_0[128,-1,128,1,0,0] C_1[0,-1,1,128,0,0] C_2[0,-1,1,128,0,0]",
        ],
    );
    // take_log values of the x row.
    let x = &f.rows[0];
    assert_eq!(take_log(x.length), 7.011227255423254);
    assert!((take_log(x.touch[0].1.count) - 14.000088).abs() < 1e-6);
    assert!((take_log(x.bottomup) - 21.000000687).abs() < 1e-8);
    assert_eq!(x.nest_level, 1);
    let flat = flatten_f64(&f, true);
    assert_eq!(flat[1], 1.0); // nest_level untransformed
    assert_eq!(flat[0], 7.011227255423254);
}

#[test]
fn s8_3_flat_vector_unit_gemm_take_log() {
    let f = features_of(UNIT_GEMM);
    let v = flatten_f32(&f, true);
    assert_eq!(v.len(), 126);
    // The spec prints the float32 values as doubles; they convert to f32 exactly.
    let (a, b, c) = (
        7.011227130889893f64 as f32,
        14.00008773803711f64 as f32,
        21.0f32,
    );
    let oh = [0., 0., 0., 0., 0., 0., 0., 0., 0., 1., 0.];
    let mut want: Vec<f32> = Vec::new();
    let mut row = |head: [f32; 4], arith: [f32; 3], touches: [[f32; 6]; 4]| {
        want.extend_from_slice(&head);
        want.extend_from_slice(&oh);
        want.extend_from_slice(&arith);
        for t in touches {
            want.extend_from_slice(&t);
        }
    };
    row(
        [a, 1., a, c],
        [0., 0., 0.],
        [
            [a, -1., b, a, 0., 0.],
            [0., -1., b, a, 0., 0.],
            [a, -1., b, a, 0., 0.],
            [a, -1., b, a, 0., 0.],
        ],
    );
    row(
        [a, 2., b, b],
        [0., 0., 0.],
        [
            [0., -1., a, a, 0., 0.],
            [1., -1., b, 1., 0., 0.],
            [1., -1., a, a, 0., 0.],
            [1., -1., a, a, 0., 0.],
        ],
    );
    row(
        [a, 3., c, a],
        [1., 1., 0.],
        [
            [1., -1., a, 1., 0., 0.],
            [a, -1., a, 1., 0., 0.],
            [0., -1., 1., a, 0., 0.],
            [0., -1., 1., a, 0., 0.],
        ],
    );
    assert_eq!(v, want);
}

#[test]
fn s8_4_cpu_schedule() {
    let text = "
parallel (y.outer, 0, 8) {
  for (x.outer, 0, 8) {
    for (k, 0, 64) {
      unrolled (y.inner, 0, 8) {
        vectorized (x.inner, 0, 8) {
          C[((((y.outer*512) + (y.inner*64)) + (x.outer*8)) + x.inner)] = (C[((((y.outer*512) + (y.inner*64)) + (x.outer*8)) + x.inner)] + (A[(((y.outer*512) + (y.inner*64)) + k)]*B[(((k*64) + (x.outer*8)) + x.inner)]))
        }
      }
    }
  }
}";
    let f = features_of(text);
    assert_rows(
        &f,
        &[
            "y.outer: 8 1 8 262144 PAR arith=[0,0,0]        A_0[512,-1,4096,64,8,1] B_0[0,-1,4096,64,1,8] C_0[512,-1,4096,64,8,1] C_1[512,-1,4096,64,8,1]",
            "x.outer: 8 2 64 32768 SERIAL arith=[0,0,0]     A_0[0,-1,512,64,0,0] B_0[8,-1,4096,8,0,0] C_0[8,-1,512,64,0,0] C_1[8,-1,512,64,0,0]",
            "k: 64 3 4096 4096 SERIAL arith=[0,0,0]         A_0[1,-1,512,8,0,0] B_0[64,-1,512,8,0,0] C_0[0,-1,64,64,0,0] C_1[0,-1,64,64,0,0]",
            "y.inner: 8 4 32768 64 UNROLL arith=[0,0,0]     A_0[64,-1,8,8,0,0] B_0[0,-1,8,8,0,0] C_0[64,-1,64,1,0,0] C_1[64,-1,64,1,0,0]",
            "x.inner: 8 5 262144 8 VEC arith=[1,1,0]        A_0[0,-1,1,8,0,0] B_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0] C_1[1,-1,8,1,0,0]",
        ],
    );
    assert_eq!(flatten_f32(&f, true).len(), 210);
    let names = flatten_names(&f);
    assert_eq!(names[0], "f0.y_outer._attr_.length");
}

#[test]
fn s8_5_flatten_names() {
    let names = flatten_names(&features_of(UNIT_GEMM));
    assert_eq!(names.len(), 126);
    let expect = [
        (0, "f0.y._attr_.length"),
        (1, "f1.y._attr_.nest_level"),
        (2, "f2.y._attr_.topdown"),
        (3, "f3.y._attr_.bottomup"),
        (4, "f4.y._attr_.ann_0"),
        (14, "f14.y._attr_.ann_10"),
        (15, "f15.y._arith_.add"),
        (16, "f16.y._arith_.mul"),
        (17, "f17.y._arith_.div"),
        (18, "f18.y.A_0.stride"),
        (19, "f19.y.A_0.mod"),
        (36, "f36.y.C_1.stride"),
        (41, "f41.y.C_1.T_reuse"),
        (42, "f42.x._attr_.length"),
        (43, "f43.x._attr_.nest_level"),
        (118, "f118.k.C_0.T_count"),
        (119, "f119.k.C_0.T_reuse"),
        (120, "f120.k.C_1.stride"),
        (125, "f125.k.C_1.T_reuse"),
    ];
    for (i, n) in expect {
        assert_eq!(names[i], n);
    }
}

/// `for y in 0..4: for x in 0..8: C[x] = A[IDX]`: strides of x and y.
fn index_case(idx: &str) -> (i64, i64) {
    let text = format!("for (y, 0, 4) {{\n for (x, 0, 8) {{\n  C[x] = A[{idx}]\n }}\n}}");
    let f = features_with(&text, &[]);
    let stride = |row: usize, key: &str| {
        f.rows[row]
            .touch
            .iter()
            .find(|(a, _)| f.key(*a) == key)
            .map(|(_, p)| *p)
            .unwrap()
    };
    // The C rows are fixed.
    assert_eq!(stride(0, "C_0").values(), [0, -1, 8, 4, 0, 0]);
    assert_eq!(stride(1, "C_0").values(), [1, -1, 8, 1, 0, 0]);
    let ay = stride(0, "A_0");
    let ax = stride(1, "A_0");
    if ay.stride != 0 {
        assert_eq!(ay.values(), [ay.stride, -1, 32, 1, 0, 0], "{idx}");
    } else {
        assert_eq!(ay.values(), [0, -1, 8, 4, 0, 0], "{idx}");
    }
    assert_eq!(ax.values(), [ax.stride, -1, 8, 1, 0, 0], "{idx}");
    (ax.stride, ay.stride)
}

#[test]
fn s8_6_index_parser() {
    let cases = [
        ("(x*4)", 4, 0),
        ("(4*x)", 1, 0),
        ("((x*4)*8)", 4, 0),
        ("((x + y)*4)", 1, 1),
        ("(x*n)", 1, 0),
        ("(x/2)", 1, 0),
        ("floordiv(x, 2)", 1, 0),
        ("floormod((x*4), 16)", 4, 0),
        ("((x + (x*4)) + y)", 1, 4),
        ("(x*-3)", -3, 0),
        ("((y*0) + x)", 1, 0),
    ];
    for (idx, sx, sy) in cases {
        assert_eq!(index_case(idx), (sx, sy), "{idx}");
    }
    // Nested load A[B[x]] (B int32).
    let f = features_with(
        "for (x, 0, 8) {\n  C[x] = A[B[x]]\n}",
        &[("B", DataType::INT32)],
    );
    assert_rows(
        &f,
        &["x: 8 1 8 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] B_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]"],
    );
}

#[test]
fn s8_6_arith() {
    let f = features_of(
        "
for (y, 0, 4) {
  C[y] = (A[y]*1.5f)
  for (x, 0, 8) {
    C[x] = ((A[x]/2f) - (B[x] % 3f))
    C[(x + 1)] = (float32((x + 1)) + floordiv(A[x], 2f))
    C[(x + 2)] = max(A[x], (B[x]*2f))
  }
}",
    );
    let all = "[1,-1,8,1,0,0]";
    assert_rows(
        &f,
        &[
            "y: 4 1 4 32 SERIAL arith=[0,1,0]  A_0[1,-1,4,1,0,0] A_1[0,-1,8,4,0,0] A_2[0,-1,8,4,0,0] A_3[0,-1,8,4,0,0] B_0[0,-1,8,4,0,0] B_1[0,-1,8,4,0,0] C_0[1,-1,4,1,0,0] C_1[0,-1,8,4,0,0] C_2[0,-1,8,4,0,0] C_3[0,-1,8,4,0,0]",
            &format!("x: 8 2 32 8 SERIAL arith=[2,1,2] A_1{all} A_2{all} A_3{all} B_0{all} B_1{all} C_1{all} C_2{all} C_3{all}"),
        ],
    );
}

#[test]
fn s8_6_dtypes() {
    let f = features_with(
        "for (x, 0, 8) {\n  A64[x] = (A64[x] + 1.0d)\n  A16[x] = (A16[x] + 1.0h)\n  Ai[x] = (Ai[x] + 1)\n}",
        &[("A64", DataType::FLOAT64), ("A16", DataType::FLOAT16), ("Ai", DataType::INT32)],
    );
    let all = "[1,-1,8,1,0,0]";
    assert_rows(
        &f,
        &[&format!("x: 8 1 8 8 SERIAL arith=[2,0,0] A16_0{all} A16_1{all} A64_0{all} A64_1{all} Ai_0{all} Ai_1{all}")],
    );
}

#[test]
fn s8_6_many() {
    let mut text = String::from("C[0] = B[0]\nfor (x, 0, 8) {\n  C[x] = A[x]\n");
    for i in 1..12 {
        text.push_str(&format!("  C[(x + {i})] = A[(x + {i})]\n"));
    }
    text.push('}');
    let f = features_of(&text);
    let all = "[1,-1,8,1,0,0]";
    let keys = "A_0 A_1 A_10 A_11 A_2 A_3 A_4 A_5 A_6 A_7 A_8 A_9 C_1 C_10 C_11 C_12 C_2 C_3 C_4 C_5 C_6 C_7 C_8 C_9";
    let touches: Vec<String> = keys.split(' ').map(|k| format!("{k}{all}")).collect();
    assert_rows(
        &f,
        &[&format!(
            "x: 8 1 8 8 SERIAL arith=[0,0,0] {}",
            touches.join(" ")
        )],
    );
}

#[test]
fn s8_6_names() {
    let f = features_of("for (x, 0, 8) {\n  a[x] = A.shared[x]\n  Z[x] = A[x]\n  A_x[x] = B[x]\n}");
    let keys: Vec<&str> = f.rows[0].touch.iter().map(|(a, _)| f.key(*a)).collect();
    assert_eq!(keys, ["A.shared_0", "A_0", "A_x_0", "B_0", "Z_0", "a_0"]);
}

#[test]
fn s8_6_zero_length_loops() {
    assert_rows(
        &features_of("for (y, 0, 4) {\n for (x, 0, 0) {\n  C[x] = A[x]\n }\n for (z, 0, 8) {\n  C[z] = A[z]\n }\n}"),
        &[
            "y: 4 1 4 32 SERIAL arith=[0,0,0] A_0[0,-1,0,4,0,0] A_1[0,-1,8,4,0,0] C_0[0,-1,0,4,0,0] C_1[0,-1,8,4,0,0]",
            "x: 0 2 0 0 SERIAL arith=[0,0,0] A_0[1,-1,0,1,0,0] C_0[1,-1,0,1,0,0]",
            "z: 8 2 0 8 SERIAL arith=[0,0,0] A_1[1,-1,8,1,0,0] C_1[1,-1,8,1,0,0]",
        ],
    );
    assert_rows(
        &features_of("for (y, 0, 0) {\n for (x, 0, 3) {\n  C[x] = A[x]\n }\n}\nfor (z, 0, 8) {\n C[z] = A[z]\n}"),
        &[
            "y: 0 1 0 0 SERIAL arith=[0,0,0] A_0[0,-1,3,0,0,0] C_0[0,-1,3,0,0,0]",
            "x: 3 2 0 3 SERIAL arith=[0,0,0] A_0[1,-1,3,1,0,0] C_0[1,-1,3,1,0,0]",
            "z: 8 1 0 8 SERIAL arith=[0,0,0] A_1[1,-1,8,1,0,0] C_1[1,-1,8,1,0,0]",
        ],
    );
}

#[test]
fn s8_6_symbolic_extent() {
    let f = features_of("for (y, 0, 4) {\n for (x, 0, n) {\n  C[x] = A[((y*8) + x)]\n }\n}");
    assert_rows(
        &f,
        &[
            "y: 4 1 4 -1 SERIAL arith=[0,0,0] A_0[8,-1,-4,1,0,0] C_0[0,-1,-1,4,0,0]",
            "x: -1 2 -4 -1 SERIAL arith=[0,0,0] A_0[1,-1,-1,1,0,0] C_0[1,-1,-1,1,0,0]",
        ],
    );
    let v = flatten_f64(&f, true);
    assert_eq!(v[0], 2.321928094887362);
    assert_eq!(v[1], 1.0);
    assert_eq!(v[2], 2.321928094887362);
    assert_eq!(v[3], -1.0);
    assert_eq!(
        &v[18..24],
        &[3.1699250014423126, -1.0, -2.321928094887362, 1.0, 0.0, 0.0]
    );
    let x0 = 18 + 12;
    assert_eq!(v[x0], -1.0);
    assert_eq!(v[x0 + 1], 2.0);
    assert_eq!(v[x0 + 2], -2.321928094887362);
}

#[test]
fn s8_6_noaccess() {
    let f = features_of("for (y, 0, 4) {\n for (x, 0, 3) {\n  evaluate(0)\n }\n}");
    assert_rows(
        &f,
        &[
            "y: 4 1 4 -1 SERIAL arith=[0,0,0]",
            "x: 3 2 12 -1 SERIAL arith=[0,0,0]",
        ],
    );
    assert_eq!(flatten_f32(&f, false).len(), 36);
}

#[test]
fn s8_6_parallel() {
    assert_rows(
        &features_of("for (y, 0, 4) {\n parallel (x, 0, 16) {\n  for (z, 0, 8) {\n   C[((x*8) + z)] = A[((x*8) + z)]\n  }\n  B[x] = A[x]\n }\n}"),
        &[
            "y: 4 1 4 512 SERIAL arith=[0,0,0] A_0[0,-1,128,4,0,0] A_1[0,-1,16,4,0,0] B_0[0,-1,16,4,0,0] C_0[0,-1,128,4,0,0]",
            "x: 16 2 64 128 PAR arith=[0,0,0] A_0[8,-1,128,1,16,1] A_1[1,-1,16,1,0,0] B_0[1,-1,16,1,0,0] C_0[8,-1,128,1,16,1]",
            "z: 8 3 512 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
        ],
    );
    assert_rows(
        &features_of("parallel (w, 0, 2) {\n for (y, 0, 4) {\n  parallel (x, 0, 16) {\n   for (z, 0, 8) {\n    C[z] = A[(((y*128) + (x*8)) + z)]\n   }\n  }\n }\n}"),
        &[
            "w: 2 1 2 1024 PAR arith=[0,0,0] A_0[0,-1,512,2,1,2] C_0[0,-1,8,128,1,2]",
            "y: 4 2 8 512 SERIAL arith=[0,0,0] A_0[128,-1,512,1,0,0] C_0[0,-1,8,64,0,0]",
            "x: 16 3 128 128 PAR arith=[0,0,0] A_0[8,-1,128,1,16,1] C_0[0,-1,8,16,1,16]",
            "z: 8 4 1024 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
        ],
    );
}

#[test]
fn s8_6_unroll_vec() {
    assert_rows(
        &features_of("for (y, 0, 4) {\n unrolled (x, 0, 16) {\n  vectorized (z, 0, 8) {\n   C[((x*8) + z)] = A[((x*8) + z)]\n  }\n }\n}"),
        &[
            "y: 4 1 4 512 SERIAL arith=[0,0,0] A_0[0,-1,128,4,0,0] C_0[0,-1,128,4,0,0]",
            "x: 16 2 64 128 UNROLL arith=[0,0,0] A_0[8,-1,128,1,0,0] C_0[8,-1,128,1,0,0]",
            "z: 8 3 512 8 VEC arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
        ],
    );
}

fn attr(name: &str, n: i64) -> String {
    format!("// attr [iter_var({name}, range(min=0, ext={n}), {name})] thread_extent = {n}")
}

#[test]
fn s8_6_gpu() {
    let text = format!(
        "{}\n{}\n{}\n{}\nfor (z, 0, 8) {{\n for (w, 0, 4) {{\n  C[(((blockIdx.x*512) + (threadIdx.y*16)) + threadIdx.x)] = A[((((((blockIdx.x*1024) + (blockIdx.y*512)) + (threadIdx.y*64)) + (threadIdx.x*4)) + (z*16)) + w)]\n }}\n}}\nB[((threadIdx.y*16) + threadIdx.x)] = A[threadIdx.x]",
        attr("blockIdx.x", 4),
        attr("blockIdx.y", 2),
        attr("threadIdx.y", 8),
        attr("threadIdx.x", 16)
    );
    assert_rows(
        &features_of(&text),
        &[
            "blockIdx.x: 4 1 4 32768 BX arith=[0,0,0] A_0[1024,-1,32768,1,8,1] A_1[0,-1,16,64,1,8] B_0[0,-1,128,8,1,8] C_0[512,-1,512,64,4,2]",
            "blockIdx.y: 2 2 8 8192 BY arith=[0,0,0] A_0[512,-1,8192,1,2,1] A_1[0,-1,16,16,1,2] B_0[0,-1,128,2,1,2] C_0[0,-1,128,64,1,2]",
            "threadIdx.y: 8 3 64 4096 TY arith=[0,0,0] A_0[64,-1,4096,1,128,1] A_1[0,-1,16,8,0,0] B_0[16,-1,128,1,0,0] C_0[16,-1,128,32,128,1]",
            "threadIdx.x: 16 4 1024 512 TX arith=[0,0,0] A_0[4,-1,512,1,16,1] A_1[1,-1,16,1,0,0] B_0[1,-1,16,1,0,0] C_0[1,-1,16,32,16,1]",
            "z: 8 5 8192 32 SERIAL arith=[0,0,0] A_0[16,-1,32,1,0,0] C_0[0,-1,1,32,0,0]",
            "w: 4 6 32768 4 SERIAL arith=[0,0,0] A_0[1,-1,4,1,0,0] C_0[0,-1,1,4,0,0]",
        ],
    );
}

#[test]
fn s8_6_gpu2() {
    let text = format!(
        "{}\nfor (z, 0, 8) {{\n C[z] = A[((blockIdx.x*8) + z)]\n}}\n{{\n{}\nB[threadIdx.x] = A[threadIdx.x]\n}}",
        attr("blockIdx.x", 4),
        attr("threadIdx.x", 16)
    );
    assert_rows(
        &features_of(&text),
        &[
            "blockIdx.x: 4 1 4 64 BX arith=[0,0,0] A_0[8,-1,32,1,0,0] A_1[0,-1,16,4,1,4] B_0[0,-1,16,4,1,4] C_0[0,-1,8,4,0,0]",
            "z: 8 2 32 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
            "threadIdx.x: 16 2 64 16 TX arith=[0,0,0] A_1[1,-1,16,1,0,0] B_0[1,-1,16,1,0,0]",
        ],
    );
}

#[test]
fn s8_6_dup_seq_same_thread_var_twice() {
    let mut b = Builder::new();
    let bx = b.var("blockIdx.x");
    let t = b.var("threadIdx.x");
    let z = b.var("z");
    let w = b.var("w");
    let first = b.thread(
        &t,
        16,
        b.for_(
            &z,
            8,
            ForKind::Serial,
            b.store(
                "C",
                b.v(&z),
                b.load("A", b.add(b.mul(b.v(&t), b.int(8)), b.v(&z))),
            ),
        ),
    );
    let second = b.thread(
        &t,
        16,
        b.for_(
            &w,
            4,
            ForKind::Serial,
            b.store(
                "B",
                b.v(&w),
                b.load("A", b.add(b.mul(b.v(&t), b.int(4)), b.v(&w))),
            ),
        ),
    );
    let p = b.finish(b.thread(&bx, 4, b.seq(vec![first, second])));
    assert_rows(
        &features_of_program(&p, &[]),
        &[
            "blockIdx.x: 4 1 4 512 BX arith=[0,0,0] A_0[0,-1,128,4,1,4] A_1[0,-1,64,4,1,4] B_0[0,-1,4,64,1,4] C_0[0,-1,8,64,1,4]",
            "threadIdx.x: 16 2 64 128 TX arith=[0,0,0] A_0[8,-1,128,1,16,1] C_0[0,-1,8,16,1,16]",
            "z: 8 3 512 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
            "threadIdx.x: 16 2 64 64 TX arith=[0,0,0] A_1[4,-1,64,1,16,1] B_0[0,-1,4,16,1,16]",
            "w: 4 3 256 4 SERIAL arith=[0,0,0] A_1[1,-1,4,1,0,0] B_0[1,-1,4,1,0,0]",
        ],
    );
}

fn vthread_case(nested: bool) -> Vec<String> {
    let mut b = Builder::new();
    let bx = b.var("blockIdx.x");
    let vx = b.var("vx");
    let z = b.var("z");
    let w = b.var("w");
    let zloop = b.for_(
        &z,
        8,
        ForKind::Serial,
        b.store(
            "C",
            b.v(&z),
            b.load("A", b.add(b.mul(b.v(&vx), b.int(8)), b.v(&z))),
        ),
    );
    let wloop = b.for_(
        &w,
        4,
        ForKind::Serial,
        b.store(
            "B",
            b.v(&w),
            b.load("A", b.add(b.mul(b.v(&vx), b.int(4)), b.v(&w))),
        ),
    );
    let body = if nested {
        b.vthread(&vx, 2, b.seq(vec![zloop, b.vthread(&vx, 2, wloop)]))
    } else {
        b.seq(vec![b.vthread(&vx, 2, zloop), b.vthread(&vx, 2, wloop)])
    };
    let p = b.finish(b.thread(&bx, 4, body));
    common::render(&features_of_program(&p, &[]))
}

#[test]
fn s8_6_vdup_seq_and_nest() {
    let norm = |v: &[&str]| -> Vec<String> {
        v.iter()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(
        vthread_case(false),
        norm(&[
            "blockIdx.x: 4 1 4 64 BX arith=[0,0,0] A_0[0,-1,16,4,0,0] A_1[0,-1,4,4,0,0] B_0[0,-1,4,4,0,0] C_0[0,-1,8,8,0,0]",
            "vx: 2 2 8 16 VTHREAD arith=[0,0,0] A_0[8,-1,16,1,0,0] C_0[0,-1,8,2,0,0]",
            "z: 8 3 64 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
            "w: 4 2 16 4 SERIAL arith=[0,0,0] A_1[1,-1,4,1,0,0] B_0[1,-1,4,1,0,0]",
        ])
    );
    assert_eq!(
        vthread_case(true),
        norm(&[
            "blockIdx.x: 4 1 4 64 BX arith=[0,0,0] A_0[0,-1,16,4,0,0] A_1[0,-1,8,4,0,0] B_0[0,-1,4,8,0,0] C_0[0,-1,8,8,0,0]",
            "vx: 2 2 8 16 VTHREAD arith=[0,0,0] A_0[8,-1,16,1,0,0] A_1[4,-1,8,1,0,0] B_0[0,-1,4,2,0,0] C_0[0,-1,8,2,0,0]",
            "z: 8 3 64 8 SERIAL arith=[0,0,0] A_0[1,-1,8,1,0,0] C_0[1,-1,8,1,0,0]",
            "w: 4 3 32 4 SERIAL arith=[0,0,0] A_1[1,-1,4,1,0,0] B_0[1,-1,4,1,0,0]",
        ])
    );
}

#[test]
fn s8_7_curve_gemm() {
    for text in [UNIT_GEMM, SEED_GEMM] {
        let f = features_of(text);
        let v = curve_sample(&f, 5).unwrap();
        assert_eq!(v.len(), 120);
        // Per key (A, B, C): the constant value of each of the four blocks; dx runs 0..4.
        let consts = [[0., 7., 0., 0.], [0., 14., 0., 0.], [7., 0., 7., 0.]];
        let mut want = Vec::new();
        for key in consts {
            for c in key {
                for i in 0..5 {
                    want.push(c as f32);
                    want.push(i as f32);
                }
            }
        }
        assert_eq!(v, want);
    }
    assert_eq!(
        curve_sample(&features_of(UNIT_GEMM), 30).unwrap().len(),
        720
    );
}

#[test]
fn s8_7_curve_order_follows_libstdcxx() {
    let f = features_of("for (i, 0, 4) {\n for (j, 0, 8) {\n  C[((i*8) + j)] = (C[j]*2f)\n }\n}");
    let v = curve_sample(&f, 4).unwrap();
    let want: Vec<f32> = [
        0, 0, 0, 1, 0, 2, 2, 0, 3, 0, 3, 1, 3, 0, 3, 1, 0, 0, 0, 1, 0, 2, 5, 0, 0, 0, 0, 1, 3, 0,
        3, 1,
    ]
    .iter()
    .map(|&x| x as f32)
    .collect();
    assert_eq!(v, want);
}

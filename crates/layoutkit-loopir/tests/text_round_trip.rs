//! The printer's output parses back to the same features (and prints the same again), for
//! random nests of every statement kind; malformed text gives LINE:COL errors.

use layoutkit_loopir::features::{curve_sample, extract, Options};
use layoutkit_loopir::random::random_program;
use layoutkit_loopir::{parse, print, Error};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn printed_nests_parse_back_to_identical_features(seed in any::<u64>(), depth in 1usize..6) {
        let program = random_program(seed, depth);
        let text = print(&program);
        let parsed = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(print(&parsed), text.clone());
        let options = Options::default();
        let a = extract(&program, &options);
        let b = extract(&parsed, &options);
        prop_assert_eq!(&a, &b, "{}", text);
        if let Ok(f) = a {
            let ca = curve_sample(&f, 6).unwrap();
            let cb = curve_sample(&b.unwrap(), 6).unwrap();
            prop_assert_eq!(ca.len(), cb.len());
            for (x, y) in ca.iter().zip(&cb) {
                prop_assert!(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
            }
        }
    }

    #[test]
    fn garbage_never_panics(text in "[ -~\n]{0,200}") {
        if let Ok(p) = parse(&text) {
            let _ = extract(&p, &Options::default());
        }
    }
}

fn err(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Err(Error::Parse { line, col, message }) => (line, col, message),
        other => panic!("{text:?}: {other:?}"),
    }
}

#[test]
fn errors_name_line_and_column() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "for (x, 0, 8) {\n  C[x] = \n}",
            2,
            10,
            "expected an expression",
        ),
        ("for (x 0, 8) {}", 1, 8, "expected `,`"),
        ("for (x, 0, 8) {\n  C[x] = A[x]\n", 3, 1, "expected `}`"),
        ("C[x] = A[x] B[x]", 1, 13, "end of line"),
        ("C[x] = 1.5", 1, 8, "suffix"),
        ("C[x] = A[(x + 1]", 1, 16, "expected `)`"),
        ("}", 1, 1, "a statement"),
        ("C[x] = $", 1, 8, "unexpected character"),
        (
            "// attr [iter_var(tx, range(min=0, ext=4), tx)] thread_extent = 4\nC[tx] = 1f",
            1,
            49,
            "invalid thread itervar `tx`",
        ),
        (
            "// attr [iter_var(threadIdx.x, , threadIdx.x)] thread_extent = n\nC[0] = 1f",
            1,
            64,
            "integer constant",
        ),
        ("C[x] = ramp(x, 1, y)", 1, 8, "lanes"),
        ("C[x] = float32(x, y)", 1, 8, "takes 1 argument"),
        (
            "allocate B[float31 * 4]\nB[0] = 1f",
            1,
            12,
            "not an element type",
        ),
        ("C[x] = 99999999999999999999", 1, 8, "too large"),
    ];
    for &(text, line, col, needle) in cases {
        let (l, c, m) = err(text);
        assert!(m.contains(needle), "{text:?}: {m}");
        assert_eq!((l, c), (line, col), "{text:?}: {m}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("C[0] = {}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(parse(&deep).is_err());
    let loops = "for (x, 0, 2) {\n".repeat(3000);
    assert!(parse(&loops).is_err());
}

#[test]
fn tvm_style_text_parses() {
    let text = "produce C {
  // attr [iter_var(blockIdx.x, range(min=0, ext=32), blockIdx.x)] thread_extent = 32
  // attr [C.local] storage_scope = \"local\"
  allocate C.local[float32 * 4]
  // attr [iter_var(vthread, , vthread)] virtual_thread = 2
  let v = (blockIdx.x*4)   # a comment
  for (x, 0, 4) {
    if ((x < 10)) {
      C.local[x] = max(A[ramp((v + x), 1, 4)], x4(0f))   // not an attr
    } else {
      evaluate(exp(float32(x)))
    }
  }
}";
    let p = parse(text).unwrap();
    let f = extract(&p, &Options::default()).unwrap();
    let names: Vec<&str> = f.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["blockIdx.x", "vthread", "x"]);
}

#[test]
fn the_deepest_accepted_input_does_not_overflow_the_stack() {
    // 63 nested loops (the limit) around an expression 127 levels deep (the limit), parsed,
    // extracted, printed and dropped on a test thread's default 2 MiB stack.
    let n = 63;
    let expr = format!("{}A[x]{}", "(".repeat(126), ")".repeat(126));
    let text = format!(
        "{}C[x] = {expr}\n{}",
        "for (x, 0, 2) {\n".repeat(n),
        "}\n".repeat(n)
    );
    let p = parse(&text).unwrap();
    let f = extract(&p, &Options::default()).unwrap();
    assert_eq!(f.rows.len(), n);
    assert!(parse(&print(&p)).is_ok());
}

//! Appendix B: libstdc++ string hash check values and unordered_map iteration orders.

use layoutkit_loopir::features::{libstdcxx_iteration_order, libstdcxx_string_hash};

#[test]
fn hash_check_values() {
    for (s, h) in [
        ("C_0", 0xf0015318eea5bc2du64),
        ("C_1", 0xcd8ff1c27b28e8be),
        ("A_0", 0x8f2ca0305ff0fbf5),
        ("out_0", 0xa0abcc958b88101a),
        ("placeholder_0", 0x611a0b2b80ca5600),
        ("placeholder_1", 0xe49274a8fbca4a9c),
    ] {
        assert_eq!(libstdcxx_string_hash(s), h, "{s}");
    }
}

fn order(keys: &[&str]) -> Vec<String> {
    libstdcxx_iteration_order(keys)
        .unwrap()
        .into_iter()
        .map(|i| keys[i].to_string())
        .collect()
}

#[test]
fn iteration_orders() {
    assert_eq!(order(&["C_0", "C_1"]), ["C_1", "C_0"]);
    assert_eq!(
        order(&["out_0", "placeholder_0", "placeholder_1"]),
        ["placeholder_0", "placeholder_1", "out_0"]
    );
    assert_eq!(
        order(&["C_0", "C_1", "A_0", "B_0"]),
        ["B_0", "A_0", "C_1", "C_0"]
    );
    let a: Vec<String> = (0..20).map(|i| format!("A_{i}")).collect();
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    assert_eq!(
        order(&refs).join(" "),
        "A_16 A_17 A_15 A_14 A_19 A_13 A_18 A_0 A_2 A_3 A_5 A_6 A_12 A_1 A_7 A_8 A_9 A_4 A_10 A_11"
    );
    // Every key comes out exactly once, through several rehashes.
    let many: Vec<String> = (0..300).map(|i| format!("buf{}_{i}", i % 7)).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut o = libstdcxx_iteration_order(&refs).unwrap();
    o.sort_unstable();
    assert_eq!(o, (0..300).collect::<Vec<_>>());
}

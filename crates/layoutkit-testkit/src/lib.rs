//! Shared test problems for layoutkit: random layouts, dims, tensors and dtypes (proptest
//! strategies), used by every crate's property tests. A dev-dependency only.

use layoutkit_core::{Axis, DType, Dims, Layout, Token};
use proptest::prelude::*;

/// Axis letters random layouts draw from.
pub const AXIS_POOL: &[char] = &['N', 'C', 'H', 'W', 'D', 'O', 'I', 'G'];

/// Block sizes random layouts draw from: powers of two nest with each other; 3 and 6 do not
/// always, which exercises the per-element fallback of the planner.
pub const BLOCK_SIZES: &[usize] = &[2, 3, 4, 6, 8, 16];

/// `rank` distinct axes, in a random order.
pub fn arb_axes(rank: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<Axis>> {
    let pool: Vec<Axis> = AXIS_POOL
        .iter()
        .filter_map(|&c| Axis::from_letter(c))
        .collect();
    rank.prop_flat_map(move |r| {
        Just(pool.clone())
            .prop_shuffle()
            .prop_map(move |p| p[..r].to_vec())
    })
}

/// A random layout over exactly `axes`: the axes in a random physical order plus up to four
/// blocks, each inserted at a random position.
pub fn arb_layout(axes: Vec<Axis>) -> impl Strategy<Value = Layout> {
    let n = axes.len();
    (
        Just(axes).prop_shuffle(),
        prop::collection::vec(
            (
                0..n,
                prop::sample::select(BLOCK_SIZES),
                any::<prop::sample::Index>(),
            ),
            0..=4,
        ),
    )
        .prop_map(|(order, blocks)| {
            let mut tokens: Vec<Token> = order.iter().map(|&a| Token::Axis(a)).collect();
            for (ai, size, pos) in blocks {
                let at = pos.index(tokens.len() + 1);
                tokens.insert(
                    at,
                    Token::Block {
                        axis: order[ai],
                        size,
                    },
                );
            }
            Layout::new("random", tokens).expect("random layouts are valid")
        })
}

/// Random extents for `axes`, each in `0..=max` (zero rarely), small enough to enumerate.
pub fn arb_dims(axes: Vec<Axis>, max: usize) -> impl Strategy<Value = Dims> {
    let n = axes.len();
    prop::collection::vec(prop_oneof![1 => Just(0usize), 12 => 1..=max], n)
        .prop_map(move |e| Dims::new(axes.iter().copied().zip(e).collect()).expect("distinct axes"))
}

/// Two layouts over the same random axes, and dims for them.
pub fn arb_pair(max_extent: usize) -> impl Strategy<Value = (Layout, Layout, Dims)> {
    arb_axes(1..=4).prop_flat_map(move |axes| {
        (
            arb_layout(axes.clone()),
            arb_layout(axes.clone()),
            arb_dims(axes, max_extent),
        )
    })
}

/// Any element type.
pub fn arb_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

/// `len` bytes of deterministic noise from `seed` (any bit pattern, NaNs included).
pub fn noise_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// The oneDNN spelling of a layout (plain axes lower case, blocked axes upper case).
pub fn onednn_name(layout: &Layout) -> String {
    layout
        .tokens()
        .iter()
        .map(|t| match *t {
            Token::Axis(a) if layout.blocks(a).is_empty() => a.block_letter().to_string(),
            other => other.to_string(),
        })
        .collect()
}

/// Strides of a view of an array of `shape` held inside a larger one: its dimensions laid out
/// in the memory order `order` (a permutation of `0..shape.len()`, outermost first), each
/// dimension `k` with `gaps[k]` unused indices after its own (a slice of a larger extent).
/// Every stride is positive and distinct elements never share an offset.
pub fn view_strides(shape: &[usize], order: &[usize], gaps: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut inner: isize = 1;
    for &k in order.iter().rev() {
        strides[k] = inner;
        inner *= (shape[k] + gaps[k]).max(1) as isize;
    }
    strides
}

/// A memory order and gaps for [`view_strides`] over `rank` dimensions: any permutation, gaps
/// of 0 to 2 indices.
pub fn arb_view(rank: usize) -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (
        Just((0..rank).collect::<Vec<usize>>()).prop_shuffle(),
        prop::collection::vec(prop_oneof![2 => Just(0usize), 1 => 1..=2usize], rank),
    )
}

//! Prints a random loop nest in the text form: `cargo run -p layoutkit-loopir --example
//! random_nest -- SEED DEPTH`. Handy for trying `layoutkit features` on varied IR.

fn main() {
    let mut args = std::env::args().skip(1);
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let depth = args.next().and_then(|s| s.parse().ok()).unwrap_or(4);
    print!(
        "{}",
        layoutkit_loopir::print(&layoutkit_loopir::random::random_program(seed, depth))
    );
}

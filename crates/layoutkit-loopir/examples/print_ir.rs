//! Parses an IR file and prints it back in the canonical text form:
//! `cargo run -p layoutkit-loopir --example print_ir -- FILE`.

fn main() {
    let path = std::env::args().nth(1).expect("usage: print_ir FILE");
    let text = std::fs::read_to_string(path).expect("readable file");
    match layoutkit_loopir::parse(&text) {
        Ok(p) => print!("{}", layoutkit_loopir::print(&p)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

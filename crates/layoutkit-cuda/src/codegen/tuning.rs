//! The knobs of the generated kernels ([`Tuning`]).

/// Knobs of the generated kernels, for measuring alternatives (the defaults are the measured
/// best, `bench/results/gpu.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// The widest load of a tile kernel, in bytes (16, 8, 4, 2 or 1).
    pub read_bytes: usize,
    /// The widest store of a tile kernel, in bytes (16, 8, 4, 2 or 1).
    pub write_bytes: usize,
    /// The store of a tile kernel whose destination rows are one flat run (rows of an odd
    /// number of bytes or halves), in bytes (16, 8 or 4). 4 measured best on an H200
    /// (`bench/results/sweep.md`, 2026-12-03): a warp's 4-byte vectors read 32 shared rows
    /// of an odd number of words apart, one bank each; 16-byte ones meet 4 to a bank.
    pub flat_write_bytes: usize,
    /// Elements per tile of units or of compound source rows; 0 for the square tiles of plain
    /// transpositions.
    pub tile_elements: usize,
    /// Whether a tile of units also writes the partial cell that ends each source row (else a
    /// `runs` kernel of its own writes it).
    pub merge_tails: bool,
    /// Whether tiles take several steps of one more loop where one step makes a small or
    /// narrow tile (`tile_steps.rs`).
    pub steps: bool,
    /// Whether tiles written as one flat run take steps too (where the steps' destination
    /// rows follow each other).
    pub flat_steps: bool,
    /// Whether plain transpositions whose source rows are a little longer than a tile and
    /// read 1 or 2 bytes at a time take whole rows per tile, read as one run.
    pub whole_rows: bool,
    /// Whether transpositions with a short side of 2-4 cells move their cells in registers
    /// (`tile_thin.rs`).
    pub thin: bool,
    /// The GPU's multiprocessors (its own count at run time; 132, the H100's and H200's,
    /// by default): steps keep enough blocks to fill them.
    pub multiprocessors: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            read_bytes: 8,
            write_bytes: 4,
            flat_write_bytes: 4,
            tile_elements: 4096,
            merge_tails: true,
            steps: true,
            flat_steps: true,
            whole_rows: true,
            thin: true,
            multiprocessors: 132,
        }
    }
}

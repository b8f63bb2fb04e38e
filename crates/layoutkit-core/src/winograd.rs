//! MACE's Winograd filter transform (`mace-image-layouts.md` section 1.7): for each output
//! channel `o` and input channel `i`, `U = G g G^T` with `g` the 3x3 kernel (row = kh) and `G`
//! the `(b+2) x 3` matrix of F(b x b, 3 x 3), `b` = 2 or 4.
//!
//! Computed in f64 from the exact fractions and rounded once to the target type. MACE's OpenCL
//! kernel computes in float with `mad()` (which a device may or may not fuse), so its images can
//! differ from ours in the last bit; compare with a tolerance.
//!
//! The inverse, `g = G+ U G+^T` with `G+` the left inverse `(G^T G)^-1 G^T`, recovers the
//! filter exactly in exact arithmetic and to rounding in floating point.

/// `G` for block 2 (rows of F(2x2, 3x3)).
const G2: [[f64; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// `G` for block 4 (rows of F(4x4, 3x3)).
const G4: [[f64; 3]; 6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// The rows of `G` for `block` (2 or 4); `None` otherwise.
pub fn g_matrix(block: u8) -> Option<Vec<[f64; 3]>> {
    match block {
        2 => Some(G2.to_vec()),
        4 => Some(G4.to_vec()),
        _ => None,
    }
}

/// Tile side `T = block + 2`.
pub fn tile(block: u8) -> usize {
    block as usize + 2
}

/// `U[t][o][i]` (`t` = row-major position in the `T x T` tile) from `g[o][i][kh][kw]` (OIHW,
/// 3x3), both as flat f64 arrays. Contract: `g.len() == o * i * 9`, `block` is 2 or 4.
pub fn transform(block: u8, o: usize, i: usize, g: &[f64]) -> Vec<f64> {
    let gm = g_matrix(block).unwrap_or_default();
    let t = gm.len();
    let mut u = vec![0.0; t * t * o * i];
    for oc in 0..o {
        for ic in 0..i {
            let k = &g[(oc * i + ic) * 9..(oc * i + ic) * 9 + 9];
            // (G g): t x 3, then (G g) G^T: t x t.
            let mut gg = vec![[0.0f64; 3]; t];
            for (r, row) in gm.iter().enumerate() {
                for c in 0..3 {
                    gg[r][c] = (0..3).map(|j| row[j] * k[j * 3 + c]).sum();
                }
            }
            for r in 0..t {
                for c in 0..t {
                    let v: f64 = (0..3).map(|j| gg[r][j] * gm[c][j]).sum();
                    u[((r * t + c) * o + oc) * i + ic] = v;
                }
            }
        }
    }
    u
}

/// The inverse of [`transform`]: `g[o][i][kh][kw]` from `U[t][o][i]`.
pub fn inverse(block: u8, o: usize, i: usize, u: &[f64]) -> Vec<f64> {
    let gm = g_matrix(block).unwrap_or_default();
    let t = gm.len();
    // G+ = (G^T G)^-1 G^T: 3 x t.
    let mut gtg = [[0.0f64; 3]; 3];
    for a in 0..3 {
        for b in 0..3 {
            gtg[a][b] = gm.iter().map(|row| row[a] * row[b]).sum();
        }
    }
    let inv = invert3(gtg);
    let pinv: Vec<Vec<f64>> = (0..3)
        .map(|a| {
            (0..t)
                .map(|r| (0..3).map(|b| inv[a][b] * gm[r][b]).sum())
                .collect()
        })
        .collect();
    let mut g = vec![0.0; o * i * 9];
    for oc in 0..o {
        for ic in 0..i {
            let at = |r: usize, c: usize| u[((r * t + c) * o + oc) * i + ic];
            for kh in 0..3 {
                for kw in 0..3 {
                    let mut v = 0.0;
                    for r in 0..t {
                        for c in 0..t {
                            v += pinv[kh][r] * at(r, c) * pinv[kw][c];
                        }
                    }
                    g[(oc * i + ic) * 9 + kh * 3 + kw] = v;
                }
            }
        }
    }
    g
}

fn invert3(m: [[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    let c = |a: usize, b: usize, d: usize, e: usize| m[a][b] * m[d][e] - m[a][e] * m[d][b];
    [
        [
            c(1, 1, 2, 2) / det,
            -c(0, 1, 2, 2) / det,
            c(0, 1, 1, 2) / det,
        ],
        [
            -c(1, 0, 2, 2) / det,
            c(0, 0, 2, 2) / det,
            -c(0, 0, 1, 2) / det,
        ],
        [
            c(1, 0, 2, 1) / det,
            -c(0, 0, 2, 1) / det,
            c(0, 0, 1, 1) / det,
        ],
    ]
}

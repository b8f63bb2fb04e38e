//! Tests of the transpose kernels against the portable loop.

use super::*;

/// Every kernel (and the edge strips around it, with the narrower kernels they go through)
/// equals the portable loop, on tile shapes
/// around each block size, with and without streaming, aligned and not, over row tables
/// and over strided rows that ask for the lines after their source ([`Ahead`]).
fn check<const N: usize>() {
    for (na, nb) in [
        (1, 1),
        (8, 8),
        (9, 17),
        (16, 16),
        (17, 65),
        (32, 64),
        (33, 130),
        (8, 32),
        // Strips of 8 to 15 columns after 16-column blocks (the 2-byte kernels' 8 x 8 blocks)
        // and of 4 to 7 after 8 (the 4-byte kernels' 4 x 4 blocks).
        (24, 28),
        (17, 45),
        (40, 24),
        (12, 14),
        (9, 13),
        (7, 5),
        (20, 7),
        // Destination rows of 4 to 7 elements (a MACE filter image's 4 lanes): 8 x 4 blocks
        // of 2-byte elements.
        (24, 4),
        (19, 6),
        // Two to fifteen rows past the last whole block and strips that are not whole narrow
        // blocks (masked blocks with AVX-512BW): 131 pixels of 250 channels, 2 rows after 48,
        // 14 after 32.
        (131, 250),
        (50, 21),
        (46, 10),
        // 4 to 7 destination rows in 4 x 8 blocks of 2-byte elements (a width-major MACE
        // image's 7-pixel rows), alone and past the last 16-row block (without AVX-512BW).
        (7, 256),
        (4, 8),
        (5, 17),
        (6, 9),
        (23, 40),
        (20, 33),
    ] {
        for stream in [false, true] {
            for (skew, strided) in [(0usize, false), (N, false), (0, true), (N, true)] {
                let s_row = na * N + 24;
                let src: Vec<u8> = (0..nb * s_row).map(|i| (i * 7 % 251) as u8).collect();
                let d_row = (nb * N).div_ceil(64) * 64 + 64;
                // Bytes outside the tile hold a value no kernel writes, so a store past a row's
                // end (of the zeros a masked block's unloaded lanes hold) shows.
                let mut got = super::super::AlignedBuf::zeroed(na * d_row + 64);
                got.fill(0x5a);
                let mut want = vec![0x5au8; got.len()];
                let srows: Vec<*const u8> = (0..nb).map(|b| src[b * s_row..].as_ptr()).collect();
                let base = got.as_mut_ptr();
                // SAFETY: rows lie inside the buffers (d_row >= nb * N + skew).
                let drows: Vec<*mut u8> = (0..na)
                    .map(|a| unsafe { base.add(a * d_row + skew) })
                    .collect();
                // SAFETY: every row holds the tile's elements.
                unsafe {
                    if strided {
                        let rows = Strided {
                            src: src.as_ptr(),
                            src_row: s_row,
                            dst: drows[0],
                            dst_row: d_row,
                            na,
                            nb,
                        };
                        // Lines past the source: a prefetch is a hint and never faults.
                        let next = src.as_ptr().wrapping_add(src.len());
                        let lines = nb * s_row / 64;
                        transpose_rows::<N, _>(Ahead { rows, next, lines }, stream)
                    } else {
                        let rows = Table {
                            src: &srows,
                            dst: &drows,
                        };
                        transpose_rows::<N, _>(rows, stream)
                    }
                };
                store_fence();
                for a in 0..na {
                    for b in 0..nb {
                        let (d, s) = (a * d_row + skew + b * N, b * s_row + a * N);
                        want[d..d + N].copy_from_slice(&src[s..s + N]);
                    }
                }
                assert_eq!(
                    &got[..],
                    &want[..],
                    "N={N} {na}x{nb} stream {stream} skew {skew} strided {strided}"
                );
            }
        }
    }
}

/// `stream_copy` copies exactly, on every length and destination offset around a line,
/// through each kernel this CPU has (16-byte streaming stores, and 32-byte ones with AVX2).
#[test]
fn streamed_copies_are_exact() {
    let src: Vec<u8> = (0..1000).map(|i| (i * 13 % 251) as u8).collect();
    for len in [0, 1, 63, 64, 65, 127, 128, 200, 640, 900] {
        for offset in [0, 1, 16, 32, 63] {
            let mut buf = super::super::AlignedBuf::zeroed(1024);
            stream_copy(&mut buf[offset..offset + len], &src[..len]);
            store_fence();
            assert_eq!(&buf[offset..offset + len], &src[..len], "{len} at {offset}");
            assert!(buf[..offset]
                .iter()
                .chain(&buf[offset + len..])
                .all(|&b| b == 0));
        }
    }
    #[cfg(target_arch = "x86_64")]
    for bytes in [0, 64, 640] {
        let mut buf = super::super::AlignedBuf::zeroed(1024);
        // SAFETY: 640 bytes at most, from an aligned buffer of 1024.
        unsafe { x86::stream_lines(buf.as_mut_ptr(), src.as_ptr(), bytes) };
        let mut wide = super::super::AlignedBuf::zeroed(1024);
        if avx2() {
            // SAFETY: as above; AVX2 is present.
            unsafe { x86::stream_lines_avx2(wide.as_mut_ptr(), src.as_ptr(), bytes) };
        } else {
            wide[..bytes].copy_from_slice(&src[..bytes]);
        }
        store_fence();
        assert_eq!(&buf[..bytes], &src[..bytes]);
        assert_eq!(&buf[..], &wide[..]);
    }
}

thread_local! {
    /// Set on a test's thread: the AVX2 kernels run as compiled for AVX2 even where the
    /// CPU has AVX-512VL.
    pub(super) static AVX2_BUILDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on this thread with the AVX2 builds of the kernels.
pub(crate) fn with_avx2_builds(f: impl FnOnce()) {
    AVX2_BUILDS.with(|c| c.set(true));
    f();
    AVX2_BUILDS.with(|c| c.set(false));
}

/// Destination rows of eight elements back to back from a line (kHWC8's pixels), the
/// last rows of each record read from a fill line: the packed kernels equal the portable
/// loop.
fn check_packed<const N: usize>() {
    for na in [8, 16, 24, 40, 48, 256] {
        for data_rows in [3, 8] {
            let s_row = na * N + 40;
            let src: Vec<u8> = (0..8 * s_row).map(|i| (i * 11 % 249) as u8).collect();
            let fill: Vec<u8> = (0..256 * N).map(|i| (200 + i % 7) as u8).collect();
            let mut got = super::super::AlignedBuf::zeroed(na * 8 * N);
            let rows = Padded {
                rows: Strided {
                    src: src.as_ptr(),
                    src_row: s_row,
                    dst: got.as_mut_ptr(),
                    dst_row: 8 * N,
                    na,
                    nb: 8,
                },
                data_rows,
                fill: fill.as_ptr(),
            };
            // SAFETY: the rows hold the tile's elements; the fill line holds 256 elements.
            unsafe { transpose_rows::<N, _>(rows, true) };
            store_fence();
            for a in 0..na {
                for b in 0..8 {
                    let want = if b < data_rows {
                        &src[b * s_row + a * N..][..N]
                    } else {
                        &fill[a * N..][..N]
                    };
                    assert_eq!(&got[(a * 8 + b) * N..][..N], want, "N={N} {na} {a} {b}");
                }
            }
        }
    }
}

fn check_all() {
    check_packed::<2>();
    check_packed::<4>();
    check::<1>();
    check::<2>();
    check::<4>();
    check::<8>();
    check::<16>();
    check::<32>();
    check::<12>();
}

/// On a CPU with AVX-512VL, the kernels as compiled for it.
#[test]
fn kernels_equal_the_portable_loop() {
    check_all();
}

/// The AVX2 builds of the same kernels (what CPUs without AVX-512 run).
#[test]
fn avx2_builds_of_the_kernels_equal_the_portable_loop() {
    with_avx2_builds(check_all);
}

/// Byte tiles whose source rows are a multiple of 4 KiB apart (NCHW planes of 64 x 64 bytes),
/// which the AVX2 kernels stage a line per row before transposing: every element where the
/// definition puts it, with and without streaming, for tiles with and without a strip of
/// columns or rows past the staged blocks.
fn check_aliased_bytes() {
    for (na, nb) in [(64, 32), (64, 64), (80, 70), (130, 96), (200, 33)] {
        for s_row in [4096usize, 8192] {
            for stream in [false, true] {
                let src: Vec<u8> = (0..nb * s_row).map(|i| (i * 7 % 251) as u8).collect();
                let d_row = nb.div_ceil(64) * 64 + 64;
                let mut got = super::super::AlignedBuf::zeroed(na * d_row);
                let rows = Strided {
                    src: src.as_ptr(),
                    src_row: s_row,
                    dst: got.as_mut_ptr(),
                    dst_row: d_row,
                    na,
                    nb,
                };
                // SAFETY: every row holds the tile's elements.
                unsafe { transpose_rows::<1, _>(rows, stream) };
                store_fence();
                for a in 0..na {
                    for b in 0..nb {
                        assert_eq!(
                            got[a * d_row + b],
                            src[b * s_row + a],
                            "{na}x{nb} rows {s_row} apart, stream {stream}: element ({a}, {b})"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn byte_tiles_from_rows_pages_apart() {
    check_aliased_bytes();
    with_avx2_builds(check_aliased_bytes);
}

/// With prefetching off (the thread's setting for conversions that fit in cache), the kernels
/// run their builds without prefetches ([`Prefetching`]): the same elements, both builds.
#[test]
fn kernels_without_prefetches_equal_the_portable_loop() {
    set_prefetches(false);
    check_all();
    with_avx2_builds(check_all);
    check_aliased_bytes();
    set_prefetches(true);
}

/// The walks over a tile's rows give the pointers `src` and `dst` give, from any first row,
/// for every kind of rows and their wrappers (stepped pointers for rows a fixed distance
/// apart, lookups for tables).
#[test]
fn walks_visit_the_rows_src_and_dst_name() {
    fn check_walks<R: Rows>(rows: R, what: &str) {
        for first in 0..rows.nb().min(rows.na()) {
            let mut src = rows.src_walk(first);
            for b in first..rows.nb() {
                assert_eq!(src(), rows.src(b), "{what}: source row {b} from {first}");
            }
            let mut dst = rows.dst_walk(first);
            for a in first..rows.na() {
                assert_eq!(
                    dst(),
                    rows.dst(a),
                    "{what}: destination row {a} from {first}"
                );
            }
        }
    }
    let src = vec![0u8; 4096];
    let mut dst = vec![0u8; 4096];
    let strided = Strided {
        src: src.as_ptr(),
        src_row: 49,
        dst: dst.as_mut_ptr(),
        dst_row: 32,
        na: 40,
        nb: 33,
    };
    check_walks(strided, "strided");
    check_walks(
        Prefetching::<_, false> { rows: strided },
        "strided, no prefetches",
    );
    let ahead = Ahead {
        rows: strided,
        next: src.as_ptr(),
        lines: 3,
    };
    check_walks(Prefetching::<_, true> { rows: ahead }, "ahead");
    let window = Window::<_, 2> {
        rows: strided,
        a0: 5,
        b0: 7,
        na: 20,
    };
    check_walks(window, "window");
    let offsets: Vec<usize> = (0..24).map(|a| (a * 37) % 500).collect();
    let offsets = Offsets {
        src: src.as_ptr(),
        src_row: 100,
        dst: dst.as_mut_ptr(),
        dst_rows: &offsets,
        rows_on_lines: false,
        nb: 30,
    };
    check_walks(offsets, "offsets");
    let srows: Vec<*const u8> = (0..20).map(|b| src[(b * 131) % 4000..].as_ptr()).collect();
    let base = dst.as_mut_ptr();
    let drows: Vec<*mut u8> = (0..25)
        .map(|a| base.wrapping_add((a * 97) % 4000))
        .collect();
    let table = Table {
        src: &srows,
        dst: &drows,
    };
    check_walks(table, "table");
    let padded = Padded {
        rows: strided,
        data_rows: 20,
        fill: src.as_ptr(),
    };
    check_walks(padded, "padded");
}

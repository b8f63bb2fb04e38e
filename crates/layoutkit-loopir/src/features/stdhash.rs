//! Emulation of libstdc++'s `std::unordered_map<std::string, T>` iteration order (spec
//! Appendix B), which decides the curve feature's choice of innermost buffer access.

/// `std::hash<std::string>` of libstdc++ (64-bit `_Hash_bytes` with seed 0xc70f6907).
///
/// ```
/// use layoutkit_loopir::features::libstdcxx_string_hash;
/// assert_eq!(libstdcxx_string_hash("C_0"), 0xf0015318eea5bc2d);
/// ```
pub fn libstdcxx_string_hash(s: &str) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let bytes = s.as_bytes();
    let mut h: u64 = 0xc70f_6907 ^ (bytes.len() as u64).wrapping_mul(M);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        let d = u64::from_le_bytes(b);
        h = (h ^ shift_mix(d.wrapping_mul(M)).wrapping_mul(M)).wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let t = rest
            .iter()
            .rev()
            .fold(0u64, |acc, &byte| (acc << 8) | byte as u64);
        h = (h ^ t).wrapping_mul(M);
    }
    h = shift_mix(h).wrapping_mul(M);
    shift_mix(h)
}

/// Bucket counts of libstdc++'s prime rehash policy (max load factor 1): the table becomes
/// `BUCKETS[i].1` buckets when element number `BUCKETS[i].0` is inserted.
const BUCKETS: [(usize, u64); 11] = [
    (1, 13),
    (14, 29),
    (30, 59),
    (60, 127),
    (128, 257),
    (258, 541),
    (542, 1109),
    (1110, 2357),
    (2358, 5087),
    (5088, 10273),
    (10274, 20753),
];

/// The iteration order of an `unordered_map<std::string, _>` after inserting `keys` (distinct)
/// in order, as indices into `keys`. `None` beyond 20753 keys (the growth table ends there).
///
/// ```
/// use layoutkit_loopir::features::libstdcxx_iteration_order;
/// assert_eq!(libstdcxx_iteration_order(&["C_0", "C_1", "A_0", "B_0"]), Some(vec![3, 2, 1, 0]));
/// ```
pub fn libstdcxx_iteration_order(keys: &[&str]) -> Option<Vec<usize>> {
    if keys.len() as u64 > BUCKETS[BUCKETS.len() - 1].1 {
        return None;
    }
    let hashes: Vec<u64> = keys.iter().map(|k| libstdcxx_string_hash(k)).collect();
    // A singly linked list over node indices; HEAD is the list head ("before begin").
    const HEAD: usize = usize::MAX;
    const NIL: usize = usize::MAX - 1;
    let mut next = vec![NIL; keys.len()];
    let mut head_next = NIL;
    let mut n_buckets: u64 = 1;
    // before[b]: the node after which bucket b's group starts (or HEAD); NIL if empty.
    let mut before: Vec<usize> = vec![NIL; 1];
    let link = |from: usize, head_next: &mut usize, next: &mut Vec<usize>| -> usize {
        if from == HEAD {
            *head_next
        } else {
            next[from]
        }
    };
    for (i, &h) in hashes.iter().enumerate() {
        let count = i + 1;
        if let Some(&(_, nb)) = BUCKETS.iter().find(|&&(at, _)| at == count) {
            // Rehash: walk the current list, rebuilding it bucket group by bucket group.
            let mut new_before = vec![NIL; nb as usize];
            let mut p = head_next;
            head_next = NIL;
            let mut front_bucket: Option<usize> = None;
            while p != NIL {
                let after = next[p];
                let b = (hashes[p] % nb) as usize;
                if new_before[b] == NIL {
                    next[p] = head_next;
                    head_next = p;
                    new_before[b] = HEAD;
                    if next[p] != NIL {
                        if let Some(fb) = front_bucket {
                            new_before[fb] = p;
                        }
                    }
                    front_bucket = Some(b);
                } else {
                    let prev = new_before[b];
                    next[p] = link(prev, &mut head_next, &mut next);
                    if prev == HEAD {
                        head_next = p;
                    } else {
                        next[prev] = p;
                    }
                }
                p = after;
            }
            before = new_before;
            n_buckets = nb;
        }
        let b = (h % n_buckets) as usize;
        if before[b] != NIL {
            let prev = before[b];
            next[i] = link(prev, &mut head_next, &mut next);
            if prev == HEAD {
                head_next = i;
            } else {
                next[prev] = i;
            }
        } else {
            next[i] = head_next;
            head_next = i;
            if next[i] != NIL {
                let nb_of_next = (hashes[next[i]] % n_buckets) as usize;
                before[nb_of_next] = i;
            }
            before[b] = HEAD;
        }
    }
    let mut out = Vec::with_capacity(keys.len());
    let mut p = head_next;
    while p != NIL {
        out.push(p);
        p = next[p];
    }
    Some(out)
}

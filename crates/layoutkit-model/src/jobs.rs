//! Runs a shard's tensors: large tensors one at a time with every thread inside the converter,
//! small ones side by side one thread each. Resident memory stays near the largest tensor (its
//! source pages and its destination buffer) plus a small buffer per thread, whatever the size
//! of the model.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use layoutkit_cpu::AlignedBuf;

use crate::{Error, Result};

/// Tensors at least this large (source or destination) run one at a time on all threads.
pub(crate) const BIG_BYTES: usize = 16 << 20;

/// A buffer reused from tensor to tensor (fresh pages cost a fault each).
#[derive(Default)]
pub(crate) struct Scratch(Option<AlignedBuf>);

/// A worker's buffers: the destination and an intermediate.
#[derive(Default)]
pub(crate) struct Scratches {
    pub out: Scratch,
    pub tmp: Scratch,
}

impl Scratch {
    /// `len` bytes of the buffer (grown when too small; contents unspecified).
    pub fn get(&mut self, len: usize) -> &mut [u8] {
        if self.0.as_ref().is_none_or(|b| b.len() < len) {
            self.0 = None;
            self.0 = Some(AlignedBuf::zeroed(len));
        }
        match &mut self.0 {
            Some(b) => &mut b[..len],
            None => unreachable!("allocated above"),
        }
    }
}

/// Runs `exec(job, threads, scratch)` for every job; the first error stops the rest.
pub(crate) fn run<J: Sync>(
    jobs: &[J],
    weight: impl Fn(&J) -> usize,
    threads: usize,
    exec: impl Fn(&J, usize, &mut Scratches) -> Result<()> + Sync,
) -> Result<()> {
    let threads = threads.max(1);
    let (big, small): (Vec<&J>, Vec<&J>) = jobs
        .iter()
        .partition(|j| threads > 1 && weight(j) >= BIG_BYTES);
    let mut scratch = Scratches::default();
    for j in big {
        exec(j, threads, &mut scratch)?;
    }
    drop(scratch);
    if threads == 1 || small.len() <= 1 {
        let mut scratch = Scratches::default();
        return small.into_iter().try_for_each(|j| exec(j, 1, &mut scratch));
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let work = || {
        let mut scratch = Scratches::default();
        while !stop.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(j) = small.get(i) else { break };
            if let Err(e) = exec(j, 1, &mut scratch) {
                stop.store(true, Ordering::Relaxed);
                let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                f.get_or_insert(e);
                break;
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(small.len()) {
            // A thread the system refuses to start only means fewer workers.
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

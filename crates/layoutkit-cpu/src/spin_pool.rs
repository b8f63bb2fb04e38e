//! A pool of worker threads that stay awake for a while after each call: the calling thread
//! and `threads - 1` workers take the items of a call from one counter, and between calls the
//! workers spin on it for [`spin_time`] (1 ms unless `LAYOUTKIT_SPIN_US` says otherwise)
//! before they sleep.
//!
//! Why not a rayon pool: waking a sleeping thread costs tens of microseconds in a virtual
//! machine (an empty `install` on a two-thread rayon pool measured 58 us after a 100 us pause,
//! 22 us back to back, on a 2-vCPU KVM guest), more than half of a 0.1 ms convolution layer,
//! which then ran no faster on two threads than on one. OpenMP runtimes, which PyTorch's CPU
//! convolutions run on, keep their threads spinning between parallel regions the same way
//! (GNU's `GOMP_SPINCOUNT`, LLVM's `KMP_BLOCKTIME`).
//!
//! Contract of [`SpinPool::run`]: `work(i)` runs exactly once for every `i < items`, on the
//! calling thread or a worker, and every call has returned when `run` returns; a panic in any
//! of them is raised again on the calling thread after all have finished.

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The work of one call: a borrowed closure, valid while the call's items are not all done.
type Work = *const (dyn Fn(usize) + Sync);

struct Shared {
    /// Call number (high 32 bits: even for a call, odd while the next one is set up) and next
    /// item to take (low 32 bits): one word, so a worker that takes an item by
    /// compare-and-swap takes it from the call it read the work of.
    counter: AtomicU64,
    /// The call's item count and work, written before its number is published.
    items: AtomicUsize,
    work: UnsafeCell<Option<Work>>,
    /// Items finished in the current call.
    done: AtomicUsize,
    /// The first panic of the current call.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    panicked: AtomicBool,
    /// Workers asleep, and their wake-up.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    spin: Duration,
}

// SAFETY: `work` is written only by the caller of `run` between calls (no worker reads it
// then: a worker reads it only after taking an item of the current call, and the caller
// waits for every item before it returns or writes the next call's work); the rest is atomics
// and locks.
unsafe impl Sync for Shared {}
// SAFETY: as above; the pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// A pool of `threads - 1` spinning workers (see the module docs).
pub(crate) struct SpinPool {
    shared: Arc<Shared>,
    threads: usize,
    /// One call at a time (the calls of several user threads queue here).
    calls: Mutex<()>,
}

/// How long workers spin between calls before they sleep: `LAYOUTKIT_SPIN_US` microseconds
/// (0: sleep at once), 1000 by default.
pub(crate) fn spin_time() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("LAYOUTKIT_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(1000);
        Duration::from_micros(us)
    })
}

impl SpinPool {
    /// The pool for `threads` threads (built once per count and kept; `threads >= 2`).
    pub(crate) fn get(threads: usize) -> Result<Arc<SpinPool>, std::io::Error> {
        type Pools = Mutex<Vec<Arc<SpinPool>>>;
        static POOLS: OnceLock<Pools> = OnceLock::new();
        let mut pools = POOLS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pools.iter().find(|p| p.threads == threads) {
            return Ok(p.clone());
        }
        let p = Arc::new(SpinPool::new(threads, spin_time())?);
        pools.push(p.clone());
        Ok(p)
    }

    fn new(threads: usize, spin: Duration) -> Result<SpinPool, std::io::Error> {
        let shared = Arc::new(Shared {
            counter: AtomicU64::new(0),
            items: AtomicUsize::new(0),
            work: UnsafeCell::new(None),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            panicked: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            spin,
        });
        for k in 1..threads.max(1) {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("layoutkit-{k}"))
                .spawn(move || worker(&s))?;
        }
        Ok(SpinPool {
            shared,
            threads: threads.max(1),
            calls: Mutex::new(()),
        })
    }

    /// Threads that run the items, the caller's included.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `work(i)` for every `i < items` (the module's contract).
    pub(crate) fn run(&self, items: usize, work: &(dyn Fn(usize) + Sync)) {
        if items == 0 {
            return;
        }
        assert!(items < 1 << 32, "too many items for one call");
        let _one = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: the lifetime is erased; the pointer is read only while this call's items
        // are not all done, and this function returns only after they are.
        let ptr: Work = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Work>(work) };
        // Calls are even numbers. The odd number before this call's, with no item left to
        // take, goes up first: a worker still in the previous call's `take_items` may have read
        // the counter before this and the item count after the new one is written below, and
        // would otherwise take an item of the previous call by compare-and-swap (the counter
        // unchanged) and run this call's work on it, which this call then runs again.
        let call = (s.counter.load(Relaxed) >> 32) + 2;
        s.counter.store(((call - 1) << 32) | 0xffff_ffff, SeqCst);
        // SAFETY: no worker reads `work` now: every item of the previous call is done, and
        // workers read it only after taking an item of the current call.
        unsafe { *s.work.get() = Some(ptr) };
        s.items.store(items, Relaxed);
        s.done.store(0, Relaxed);
        s.counter.store(call << 32, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        take_items(s, call);
        let mut spins = 0u32;
        while s.done.load(Acquire) < items {
            spins += 1;
            if spins < 1 << 16 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if s.panicked.swap(false, AcqRel) {
            let p = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
            resume_unwind(p.unwrap_or_else(|| Box::new("a worker panicked")));
        }
    }
}

/// Takes and runs items of call `call` until none are left (or a later call began).
fn take_items(s: &Shared, call: u64) {
    loop {
        let v = s.counter.load(Acquire);
        let i = (v & 0xffff_ffff) as usize;
        if v >> 32 != call || i >= s.items.load(Acquire) {
            return;
        }
        if s.counter
            .compare_exchange_weak(v, v + 1, AcqRel, Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: item `i` of call `call` is taken and not done, so the caller of `run` is
        // still waiting and its work (written before the call was published) is alive.
        let work = unsafe { (*s.work.get()).expect("work set") };
        // SAFETY: as above.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe { (*work)(i) }));
        if let Err(p) = r {
            let mut slot = s.panic.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(p);
            }
            s.panicked.store(true, Release);
        }
        s.done.fetch_add(1, Release);
    }
}

/// A worker: waits for a call (spinning for `spin`, then asleep), takes its items, repeats.
fn worker(s: &Shared) {
    let mut seen = 0u64;
    loop {
        let start = Instant::now();
        let mut n = 0u32;
        let call = loop {
            let c = s.counter.load(Acquire) >> 32;
            if c != seen && c.is_multiple_of(2) {
                break c;
            }
            n = n.wrapping_add(1);
            if n.is_multiple_of(1024) && start.elapsed() >= s.spin {
                let g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, SeqCst);
                let mut g = g;
                while matches!(s.counter.load(SeqCst) >> 32, c if c == seen || !c.is_multiple_of(2))
                {
                    g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, SeqCst);
                drop(g);
            } else {
                std::hint::spin_loop();
            }
        };
        seen = call;
        take_items(s, call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_item_runs_once_across_calls_and_pauses() {
        for (threads, spin_us) in [(2, 0), (3, 50), (4, 1000)] {
            let pool = SpinPool::new(threads, Duration::from_micros(spin_us)).unwrap();
            for call in 0..200usize {
                let items = call % 37 + (call % 3) * 100;
                let hits: Vec<AtomicU32> = (0..items).map(|_| AtomicU32::new(0)).collect();
                pool.run(items, &|i| {
                    hits[i].fetch_add(1, Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "call {call}");
                if call % 50 == 0 {
                    // Longer than the spin: the workers go to sleep and must wake up.
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        }
    }

    #[test]
    fn a_panicking_item_is_raised_after_all_items_finish() {
        let pool = SpinPool::new(2, Duration::from_micros(100)).unwrap();
        let finished = AtomicU32::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(64, &|i| {
                if i == 7 {
                    panic!("item seven");
                }
                finished.fetch_add(1, Relaxed);
            })
        }));
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"item seven"));
        assert_eq!(finished.load(Relaxed), 63);
        // The pool still works after a panic.
        let n = AtomicU32::new(0);
        pool.run(10, &|_| {
            n.fetch_add(1, Relaxed);
        });
        assert_eq!(n.load(Relaxed), 10);
    }
}

//! Timing GPU work with CUDA events: queued from the host ([`Launches::Host`]), or captured in a
//! CUDA graph and replayed ([`Launches::Graph`]), which leaves the host's launch time out.

use std::sync::Arc;

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstream, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream};

use crate::{Cuda, Error};

/// Device times of repeated work (all of one conversion's or convolution's launches), in
/// seconds, from CUDA events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timing {
    pub seconds: Vec<f64>,
}

impl Timing {
    /// The median (0 when nothing was timed).
    pub fn median(&self) -> f64 {
        let mut v = self.seconds.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }
}

/// How the repetitions of a timed run are launched; each repetition is timed between two CUDA
/// events and reported per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launches {
    /// `n` calls captured once in a CUDA graph; each repetition replays the graph: GPU time
    /// only, as `bench/torch_conv_bench.py` times cuDNN. A call shorter than the host's time
    /// to launch it is timed at the GPU's speed.
    Graph(usize),
    /// `n` calls queued from the host, back to back: where the host needs longer to launch a
    /// call than the GPU to run it, the host's time is what is measured.
    Host(usize),
}

impl Launches {
    /// Calls per repetition (at least 1).
    pub fn count(self) -> usize {
        match self {
            Launches::Graph(n) | Launches::Host(n) => n.max(1),
        }
    }

    /// "graph" or "host", for reports.
    pub fn name(self) -> &'static str {
        match self {
            Launches::Graph(_) => "graph",
            Launches::Host(_) => "host",
        }
    }
}

impl Cuda {
    /// Runs `work` once untimed on this object's stream (warm-up; what it writes is the
    /// result), then `repeats` repetitions of `launches.count()` calls, launched as `launches`
    /// says; the time per call (repetition time / count). `work` queues its calls on the raw
    /// stream it is given.
    ///
    /// [`Launches::Graph`] captures on a stream of its own (the legacy default stream, this
    /// object's, cannot be captured), after this object's stream has finished, and has
    /// finished when this returns. Contract for it: `work` must only queue kernels (or copies)
    /// on the stream it is given and pass plain device addresses, never `cudarc` slices
    /// (their event tracking waits on events recorded outside the capture, which a capture
    /// refuses).
    pub(crate) fn timed_launches(
        &self,
        repeats: usize,
        launches: Launches,
        mut work: impl FnMut(CUstream) -> Result<(), Error>,
    ) -> Result<Timing, Error> {
        let main = self.stream.cu_stream();
        match launches {
            Launches::Host(n) => self.timed_on(&self.stream, repeats, n, || work(main)),
            Launches::Graph(n) => {
                work(main)?;
                if repeats == 0 {
                    return Ok(Timing::default());
                }
                let sync = |s: &CudaStream| {
                    s.synchronize()
                        .map_err(|e| Error::driver("cuStreamSynchronize", e))
                };
                sync(&self.stream)?;
                let side = CaptureStream::new(self)?;
                let n = n.max(1);
                let graph = side.capture(n, &mut work)?;
                graph
                    .upload()
                    .map_err(|e| Error::driver("cuGraphUpload", e))?;
                // The first replay is the graph's warm-up; its time is dropped.
                let mut timing = self.timed_on(&side.0, repeats, 1, || {
                    graph
                        .launch()
                        .map_err(|e| Error::driver("cuGraphLaunch", e))
                })?;
                sync(&side.0)?;
                timing.seconds.iter_mut().for_each(|s| *s /= n as f64);
                Ok(timing)
            }
        }
    }

    /// [`Cuda::timed_on`] this object's stream.
    pub(crate) fn timed(
        &self,
        repeats: usize,
        per: usize,
        work: impl FnMut() -> Result<(), Error>,
    ) -> Result<Timing, Error> {
        self.timed_on(&self.stream, repeats, per, work)
    }

    /// Runs `work` once untimed (warm-up), then `repeats` times `per` back-to-back calls, each
    /// group between two CUDA events recorded on `stream` (where `work` queues its calls); the
    /// time per call (group time / `per`) of each repetition.
    fn timed_on(
        &self,
        stream: &CudaStream,
        repeats: usize,
        per: usize,
        mut work: impl FnMut() -> Result<(), Error>,
    ) -> Result<Timing, Error> {
        let per = per.max(1);
        let event = || {
            stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| Error::driver("cuEventRecord", e))
        };
        let mut timing = Timing::default();
        for rep in 0..=repeats {
            let count = if rep == 0 { 1 } else { per };
            let start = event()?;
            for _ in 0..count {
                work()?;
            }
            let end = event()?;
            end.synchronize()
                .map_err(|e| Error::driver("cuEventSynchronize", e))?;
            if rep > 0 {
                let ms = start
                    .elapsed_ms(&end)
                    .map_err(|e| Error::driver("cuEventElapsedTime", e))?;
                timing.seconds.push(ms as f64 * 1e-3 / per as f64);
            }
        }
        Ok(timing)
    }
}

/// A non-blocking stream of the GPU's primary context, created raw (a `cudarc` stream of its
/// own would turn on `cudarc`'s event tracking for the whole context) and destroyed on drop.
struct CaptureStream(Arc<CudaStream>);

impl CaptureStream {
    fn new(cuda: &Cuda) -> Result<CaptureStream, Error> {
        cuda.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let raw = cudarc::driver::result::stream::create(
            cudarc::driver::result::stream::StreamKind::NonBlocking,
        )
        .map_err(|e| Error::driver("cuStreamCreate", e))?;
        // SAFETY: `raw` was just created in this context; the wrapper does not own it, and
        // `Drop` destroys it once, after every user of the wrapper (the graph, the timing)
        // has been dropped, since they borrow `self`.
        Ok(CaptureStream(unsafe { cuda.ctx.wrap_borrowed_stream(raw) }))
    }

    /// `n` calls of `work` on this stream captured into a CUDA graph; the capture is ended on
    /// every path (a failed call leaves the stream as it was).
    fn capture(
        &self,
        n: usize,
        work: &mut impl FnMut(CUstream) -> Result<(), Error>,
    ) -> Result<CudaGraph, Error> {
        let stream = &self.0;
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| Error::driver("cuStreamBeginCapture", e))?;
        let queued = (0..n).try_for_each(|_| work(stream.cu_stream()));
        let graph = stream.end_capture(CUgraphInstantiate_flags(0));
        queued?;
        graph
            .map_err(|e| Error::driver("cuStreamEndCapture", e))?
            .ok_or_else(|| Error::Unsupported("the captured CUDA graph is empty".into()))
    }
}

impl Drop for CaptureStream {
    fn drop(&mut self) {
        // SAFETY: the stream was created by `CaptureStream::new` and is destroyed only here;
        // pending work still completes (cuStreamDestroy releases it afterwards).
        let _ = unsafe { cudarc::driver::result::stream::destroy(self.0.cu_stream()) };
    }
}

//! NCHW activations through NHWC: our NCHW loaders read each pixel's 2-byte channels through
//! registers (no `cp.async` runs of channels), which the fair benchmark measures at 19-63% of
//! the NHWC kernel on ResNet-50's tensor-core layers, while converting the input to NHWC costs
//! one memory pass of the activations (the f16/bf16 kernels then write NCHW themselves; int8
//! output takes a second pass back). [`ConvKernel::for_problem`] therefore plans NCHW
//! activations through NHWC where a tensor-core kernel takes the problem and it has enough work
//! per converted byte ([`crate::conv::NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE`]), and reads NCHW in
//! place otherwise (the direct kernel: the stem's C = 3 runs 4x faster that way; 1x1 layers
//! with few channels) and where GPU 0 is a Hopper whose footprint kernel
//! ([`crate::conv::nchw_footprint`]) reads it faster than the conversion costs;
//! [`Cuda::conv2d_nchw_via_nhwc_timed`] times the conversion route.

use cudarc::driver::{DevicePtr, DevicePtrMut};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, Dims};

use crate::conv::{ConvKernel, ConvLayout};
use crate::{Cuda, Error, Launches, Timing};

impl Cuda {
    /// Convolves NCHW activations `x` with the OHWI filter `w` through `kernel` (a kernel
    /// reading NHWC): each repetition converts `x` to NHWC, runs the kernel and, where the
    /// kernel writes NHWC (`out_layout`), converts its output to NCHW, all timed together
    /// (CUDA events around `launches`: a CUDA graph of that many rounds, or rounds queued from
    /// the host; time per round). Returns the NCHW
    /// output of the kernel's output type.
    ///
    /// Contract: the output equals [`Cuda::conv2d_timed`]'s output for the NHWC kernel
    /// converted to NCHW (the conversions are exact); errors for a kernel that does not read
    /// NHWC or writes neither NHWC nor NCHW, buffers of the wrong size, and what
    /// [`Cuda::prepare_conv`] refuses.
    pub fn conv2d_nchw_via_nhwc_timed(
        &self,
        kernel: &ConvKernel,
        x: &[u8],
        w: &[u8],
        repeats: usize,
        launches: Launches,
    ) -> Result<(Vec<u8>, Timing), Error> {
        if kernel.layout != ConvLayout::Nhwc
            || !matches!(kernel.out_layout, ConvLayout::Nhwc | ConvLayout::Nchw)
            || kernel.bias
        {
            return Err(Error::Unsupported(
                "conv2d_nchw_via_nhwc_timed runs a kernel reading NHWC, writing NHWC or NCHW, \
                 without bias"
                    .into(),
            ));
        }
        let convert_back = kernel.out_layout == ConvLayout::Nhwc;
        let s = &kernel.shape;
        let dims = |c: usize, h: usize, w: usize| {
            Dims::parse(&format!("N={},C={c},H={h},W={w}", s.n)).map_err(Error::from)
        };
        let (xd, yd) = (dims(s.c, s.h, s.w)?, dims(s.o, s.oh, s.ow)?);
        let shaped = |f: &str, d: &Dims| -> Result<_, Error> { Ok(parse_format(f)?.shaped(d)?) };
        let pre = self.prepare(
            &ConversionPlan::new(&shaped("NCHW", &xd)?, &shaped("NHWC", &xd)?)?,
            &CastSpec::new(kernel.input, kernel.input, None)?,
        )?;
        let post = self.prepare(
            &ConversionPlan::new(&shaped("NHWC", &yd)?, &shaped("NCHW", &yd)?)?,
            &CastSpec::new(kernel.out, kernel.out, None)?,
        )?;
        let conv = self.prepare_conv(kernel)?;
        let (x_bytes, w_bytes, y_bytes) = conv.bytes();
        if x.len() != x_bytes || w.len() != w_bytes {
            return Err(layoutkit_core::Error::BufferSize {
                what: format!("NCHW activations and OHWI filter ({})", kernel.input),
                expected_bytes: x_bytes + w_bytes,
                actual_bytes: x.len() + w.len(),
            }
            .into());
        }
        let htod = |e| Error::driver("cuMemcpyHtoD", e);
        let alloc = |n: usize| {
            self.stream
                .alloc_zeros::<u8>(n.max(1))
                .map_err(|e| Error::driver("cuMemAlloc", e))
        };
        let d_x = self.stream.clone_htod(x).map_err(htod)?;
        let d_w = self.stream.clone_htod(w).map_err(htod)?;
        let mut params = crate::conv::channel_params(kernel, None, None);
        params.push(0.0);
        let d_b = self.stream.clone_htod(&params).map_err(htod)?;
        let (mut d_xn, mut d_yn, mut d_y) = (alloc(x_bytes)?, alloc(y_bytes)?, alloc(y_bytes)?);
        let timing = {
            let (xp, _a) = d_x.device_ptr(&self.stream);
            let (wp, _b) = d_w.device_ptr(&self.stream);
            let (bp, _c) = d_b.device_ptr(&self.stream);
            let (xnp, _d) = d_xn.device_ptr_mut(&self.stream);
            let (ynp, _e) = d_yn.device_ptr_mut(&self.stream);
            let (yp, _f) = d_y.device_ptr_mut(&self.stream);
            self.timed_launches(repeats, launches, |raw| {
                // SAFETY: every buffer was allocated above with the size its plan or kernel
                // needs (checked against `conv.bytes()`), and all live until the timing has
                // synchronised; `raw` is a live stream of this context (the wrapper does not
                // own it), and the rounds never overlap in time.
                let stream = unsafe { self.ctx.wrap_borrowed_stream(raw) };
                unsafe {
                    self.launch_conversion(&pre, xp, xnp, &stream)?;
                    if convert_back {
                        self.conv2d_on_stream(
                            &conv,
                            (xnp, x_bytes),
                            (wp, w_bytes),
                            bp,
                            (ynp, y_bytes),
                            raw,
                        )?;
                        self.launch_conversion(&post, ynp, yp, &stream)
                    } else {
                        self.conv2d_on_stream(
                            &conv,
                            (xnp, x_bytes),
                            (wp, w_bytes),
                            bp,
                            (yp, y_bytes),
                            raw,
                        )
                    }
                }
            })?
        };
        let mut y = self
            .stream
            .clone_dtoh(&d_y)
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
        y.truncate(y_bytes);
        Ok((y, timing))
    }
}

//! Running generated conversions: device memory (buffers and images), launches, timings.

use std::ffi::c_void;
use std::ptr;

use layoutkit_core::{DType, ShapedLayout};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{
    Buffer, ClMem, Image, CL_FLOAT, CL_HALF_FLOAT, CL_MEM_COPY_HOST_PTR, CL_MEM_OBJECT_IMAGE2D,
    CL_MEM_READ_ONLY, CL_MEM_READ_WRITE, CL_MEM_WRITE_ONLY, CL_RGBA,
};
use opencl3::program::Program;
use opencl3::types::{cl_image_desc, cl_image_format, cl_mem, CL_BLOCKING};

use crate::codegen::{generate, KernelSource, Storage};
use crate::{Error, OpenCl};

/// Device times of repeated launches, in seconds (from OpenCL event profiling).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timing {
    pub seconds: Vec<f64>,
}

impl Timing {
    /// The median launch time (0 when nothing was timed).
    pub fn median(&self) -> f64 {
        let mut v = self.seconds.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }
}

/// Device memory of one tensor.
enum Mem {
    Buffer(Buffer<u8>),
    Image(Image),
}

impl Mem {
    fn handle(&self) -> cl_mem {
        match self {
            Mem::Buffer(b) => b.get(),
            Mem::Image(i) => i.get(),
        }
    }
}

impl OpenCl {
    /// Converts `src_data` (the physical array of `src`, elements of `src_dtype`; for an image
    /// layout the `[height, width, 4]` array) into the physical array of `dst`.
    ///
    /// Contract: bit-identical to `layoutkit_cpu::convert_reference` for the conversions
    /// [`crate::codegen::generate`] supports.
    pub fn convert(
        &self,
        src: &ShapedLayout,
        src_data: &[u8],
        src_dtype: DType,
        dst: &ShapedLayout,
        dst_dtype: DType,
    ) -> Result<Vec<u8>, Error> {
        self.convert_timed(src, src_data, src_dtype, dst, dst_dtype, 0)
            .map(|(out, _)| out)
    }

    /// [`OpenCl::convert`], then `repeats` more launches of the same kernel on the same memory,
    /// each timed on the device.
    pub fn convert_timed(
        &self,
        src: &ShapedLayout,
        src_data: &[u8],
        src_dtype: DType,
        dst: &ShapedLayout,
        dst_dtype: DType,
        repeats: usize,
    ) -> Result<(Vec<u8>, Timing), Error> {
        let ks = generate(src, src_dtype, dst, dst_dtype)?;
        for l in [src, dst] {
            self.check_image(l)?;
        }
        let expected = src.bytes(src_dtype)?;
        if src_data.len() != expected {
            return Err(layoutkit_core::Error::BufferSize {
                what: format!("source {} of {src_dtype}", src.layout()),
                expected_bytes: expected,
                actual_bytes: src_data.len(),
            }
            .into());
        }
        let out_bytes = dst.bytes(dst_dtype)?;
        if out_bytes == 0 {
            return Ok((Vec::new(), Timing::default()));
        }
        let src_mem = self.upload(src, src_data, src_dtype, ks.src)?;
        let dst_mem = self.allocate(dst, dst_dtype, ks.dst, out_bytes)?;
        let mut timing = Timing::default();
        self.with_kernel(&ks, |kernel| {
            for rep in 0..=repeats {
                // SAFETY: the kernel takes exactly two memory arguments of these kinds (its
                // source is generated with them), and the global size covers what it writes.
                let event = unsafe {
                    ExecuteKernel::new(kernel)
                        .set_arg(&src_mem.handle())
                        .set_arg(&dst_mem.handle())
                        .set_global_work_sizes(&ks.global)
                        .enqueue_nd_range(&self.queue)
                }
                .map_err(|e| Error::cl("clEnqueueNDRangeKernel", e))?;
                event.wait().map_err(|e| Error::cl("clWaitForEvents", e))?;
                if rep > 0 {
                    let t0 = event.profiling_command_start().unwrap_or(0);
                    let t1 = event.profiling_command_end().unwrap_or(0);
                    timing.seconds.push(t1.saturating_sub(t0) as f64 * 1e-9);
                }
            }
            Ok(())
        })?;
        let out = self.download(&dst_mem, dst, out_bytes)?;
        Ok((out, timing))
    }

    /// Times `repeats` device-to-device copies of `bytes` bytes (`clEnqueueCopyBuffer`), the
    /// ceiling for a conversion moving the same bytes.
    pub fn copy_timed(&self, bytes: usize, repeats: usize) -> Result<Timing, Error> {
        let bytes = bytes.max(1);
        // SAFETY: no host pointer; sizes are positive.
        let a = unsafe {
            Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes, ptr::null_mut())
        }
        .map_err(|e| Error::cl("clCreateBuffer", e))?;
        // SAFETY: as above.
        let mut b = unsafe {
            Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes, ptr::null_mut())
        }
        .map_err(|e| Error::cl("clCreateBuffer", e))?;
        let mut timing = Timing::default();
        for rep in 0..=repeats {
            // SAFETY: both buffers hold `bytes` bytes.
            let event = unsafe { self.queue.enqueue_copy_buffer(&a, &mut b, 0, 0, bytes, &[]) }
                .map_err(|e| Error::cl("clEnqueueCopyBuffer", e))?;
            event.wait().map_err(|e| Error::cl("clWaitForEvents", e))?;
            if rep > 0 {
                let t0 = event.profiling_command_start().unwrap_or(0);
                let t1 = event.profiling_command_end().unwrap_or(0);
                timing.seconds.push(t1.saturating_sub(t0) as f64 * 1e-9);
            }
        }
        Ok(timing)
    }

    /// Reads pixels of an image (data in `image`'s `[height, width, 4]` layout) at arbitrary
    /// coordinates through the same sampler as the conversion kernels: outside the image every
    /// lane reads 0.
    pub fn read_pixels(
        &self,
        image: &ShapedLayout,
        data: &[u8],
        dtype: DType,
        coords: &[(i32, i32)],
    ) -> Result<Vec<[f32; 4]>, Error> {
        self.check_image(image)?;
        if coords.is_empty() || image.elements() == 0 {
            return Ok(vec![[0.0; 4]; coords.len()]);
        }
        let img = self.upload(image, data, dtype, Storage::Image)?;
        let xy: Vec<u8> = coords
            .iter()
            .flat_map(|&(x, y)| [x.to_le_bytes(), y.to_le_bytes()].concat())
            .collect();
        let xy_mem = self.buffer_from(&xy)?;
        let out = self.allocate_buffer(coords.len() * 16)?;
        let ks = KernelSource {
            source: "__constant sampler_t SMP = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;\n\
                     __kernel void probe(__read_only image2d_t img, __global const int2* xy, __global float4* out) {\n\
                       size_t i = get_global_id(0); out[i] = read_imagef(img, SMP, xy[i]);\n}\n"
                .into(),
            name: "probe",
            src: Storage::Image,
            dst: Storage::Buffer,
            global: vec![coords.len()],
        };
        self.with_kernel(&ks, |kernel| {
            // SAFETY: `probe` takes an image and two buffers of the sizes allocated above.
            let event = unsafe {
                ExecuteKernel::new(kernel)
                    .set_arg(&img.handle())
                    .set_arg(&xy_mem.get())
                    .set_arg(&out.get())
                    .set_global_work_sizes(&ks.global)
                    .enqueue_nd_range(&self.queue)
            }
            .map_err(|e| Error::cl("clEnqueueNDRangeKernel", e))?;
            event.wait().map_err(|e| Error::cl("clWaitForEvents", e))
        })?;
        let bytes = self.download(&Mem::Buffer(out), image, coords.len() * 16)?;
        Ok(bytes
            .chunks_exact(16)
            .map(|c| {
                let f = |i: usize| f32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
                [f(0), f(4), f(8), f(12)]
            })
            .collect())
    }

    /// Refuses, before any allocation, an image the device cannot hold.
    fn check_image(&self, l: &ShapedLayout) -> Result<(), Error> {
        let Some((w, h)) = l.image_size() else {
            return Ok(());
        };
        if !self.info.image_support {
            return Err(Error::Unsupported(format!(
                "{} has no image support",
                self.info.name
            )));
        }
        let (mw, mh) = self.info.image2d_max;
        if w > mw || h > mh {
            return Err(Error::ImageTooLarge {
                width: w,
                height: h,
                max_width: mw,
                max_height: mh,
                device: self.info.name.clone(),
            });
        }
        Ok(())
    }

    fn with_kernel<T>(
        &self,
        ks: &KernelSource,
        f: impl FnOnce(&Kernel) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut cache = self.kernels.borrow_mut();
        if !cache.contains_key(&ks.source) {
            let program = Program::create_and_build_from_source(&self.context, &ks.source, "")
                .map_err(|log| Error::Build(format!("{log}\n{}", ks.source)))?;
            let kernel =
                Kernel::create(&program, ks.name).map_err(|e| Error::cl("clCreateKernel", e))?;
            cache.insert(ks.source.clone(), (program, kernel));
        }
        let (_, kernel) = &cache[&ks.source];
        f(kernel)
    }

    fn image_format(dtype: DType) -> cl_image_format {
        cl_image_format {
            image_channel_order: CL_RGBA,
            image_channel_data_type: if dtype == DType::F16 {
                CL_HALF_FLOAT
            } else {
                CL_FLOAT
            },
        }
    }

    fn image_desc(l: &ShapedLayout) -> cl_image_desc {
        let (w, h) = l.image_size().unwrap_or((1, 1));
        cl_image_desc {
            image_type: CL_MEM_OBJECT_IMAGE2D,
            image_width: w,
            image_height: h,
            image_depth: 1,
            image_array_size: 1,
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer: ptr::null_mut(),
        }
    }

    fn buffer_from(&self, data: &[u8]) -> Result<Buffer<u8>, Error> {
        let mut copy = data.to_vec();
        // SAFETY: CL_MEM_COPY_HOST_PTR copies `copy.len()` bytes from a live allocation during
        // the call.
        unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                copy.len(),
                copy.as_mut_ptr() as *mut c_void,
            )
        }
        .map_err(|e| Error::cl("clCreateBuffer", e))
    }

    fn allocate_buffer(&self, bytes: usize) -> Result<Buffer<u8>, Error> {
        // SAFETY: no host pointer; the size is positive.
        unsafe { Buffer::<u8>::create(&self.context, CL_MEM_WRITE_ONLY, bytes, ptr::null_mut()) }
            .map_err(|e| Error::cl("clCreateBuffer", e))
    }

    fn upload(
        &self,
        l: &ShapedLayout,
        data: &[u8],
        dtype: DType,
        st: Storage,
    ) -> Result<Mem, Error> {
        match st {
            Storage::Buffer => Ok(Mem::Buffer(self.buffer_from(data)?)),
            Storage::Image => {
                let mut copy = data.to_vec();
                let format = Self::image_format(dtype);
                let desc = Self::image_desc(l);
                // SAFETY: the host array is [height, width, 4] elements of `dtype`, tightly
                // packed (row pitch 0), and is copied during the call.
                unsafe {
                    Image::create(
                        &self.context,
                        CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        &format,
                        &desc,
                        copy.as_mut_ptr() as *mut c_void,
                    )
                }
                .map(Mem::Image)
                .map_err(|e| Error::cl("clCreateImage", e))
            }
        }
    }

    fn allocate(
        &self,
        l: &ShapedLayout,
        dtype: DType,
        st: Storage,
        bytes: usize,
    ) -> Result<Mem, Error> {
        match st {
            Storage::Buffer => Ok(Mem::Buffer(self.allocate_buffer(bytes)?)),
            Storage::Image => {
                let format = Self::image_format(dtype);
                let desc = Self::image_desc(l);
                // SAFETY: no host pointer.
                unsafe {
                    Image::create(
                        &self.context,
                        CL_MEM_WRITE_ONLY,
                        &format,
                        &desc,
                        ptr::null_mut(),
                    )
                }
                .map(Mem::Image)
                .map_err(|e| Error::cl("clCreateImage", e))
            }
        }
    }

    fn download(&self, mem: &Mem, l: &ShapedLayout, bytes: usize) -> Result<Vec<u8>, Error> {
        let mut out = vec![0u8; bytes];
        match mem {
            Mem::Buffer(b) => {
                // SAFETY: `out` holds exactly the buffer's size; the read is blocking.
                unsafe {
                    self.queue
                        .enqueue_read_buffer(b, CL_BLOCKING, 0, &mut out, &[])
                }
                .map_err(|e| Error::cl("clEnqueueReadBuffer", e))?;
            }
            Mem::Image(img) => {
                let (w, h) = l.image_size().unwrap_or((0, 0));
                let origin = [0usize; 3];
                let region = [w, h, 1];
                // SAFETY: `out` holds height * width * 4 elements, tightly packed (row pitch
                // 0); the read is blocking.
                unsafe {
                    self.queue.enqueue_read_image(
                        img,
                        CL_BLOCKING,
                        origin.as_ptr(),
                        region.as_ptr(),
                        0,
                        0,
                        out.as_mut_ptr() as *mut c_void,
                        &[],
                    )
                }
                .map_err(|e| Error::cl("clEnqueueReadImage", e))?;
            }
        }
        Ok(out)
    }
}

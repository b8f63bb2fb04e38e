//! Conversions of device buffers that start anywhere on a whole element: a framework's tensor
//! view can start mid-vector, where the kernels' 16-byte accesses would fault. Such buffers
//! take kernels generated for their distance from the 16-byte boundary
//! ([`BufferShift`], `codegen::generate_shifted`), launched at that boundary.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{CastSpec, ShapedLayout};

use crate::codegen::{generate_shifted, BufferShift};
use crate::device::ShiftedLaunches;
use crate::{Cuda, DeviceConversion, Error};

impl Cuda {
    /// [`Cuda::convert`] with the device buffers placed `shift` elements past a 16-byte
    /// boundary (each at most 15 bytes on): the path of a tensor view that starts mid-vector,
    /// for checks against the reference. Contract: bit-identical to
    /// `layoutkit_cpu::convert_reference`, whatever the shift.
    pub fn convert_shifted(
        &self,
        src: &ShapedLayout,
        src_data: &[u8],
        dst: &ShapedLayout,
        cast: &CastSpec,
        shift: BufferShift,
    ) -> Result<Vec<u8>, Error> {
        let plan = ConversionPlan::new(src, dst)?;
        let conv = self.prepare(&plan, cast)?;
        let (es, ed) = (cast.src.size_bytes(), cast.dst.size_bytes());
        let (ss, ds) = (shift.src * es, shift.dst * ed);
        if ss >= 16 || ds >= 16 {
            return Err(Error::Unsupported(format!(
                "a shift of {shift:?} elements reaches past the next 16-byte boundary"
            )));
        }
        if src_data.len() != conv.src_bytes {
            return Err(layoutkit_core::Error::BufferSize {
                what: format!("source {} of {}", src.layout(), cast.src),
                expected_bytes: conv.src_bytes,
                actual_bytes: src_data.len(),
            }
            .into());
        }
        if conv.dst_bytes == 0 {
            return Ok(Vec::new());
        }
        let mut host = vec![0u8; ss];
        host.extend_from_slice(src_data);
        let d_src = self
            .stream
            .clone_htod(&host)
            .map_err(|e| Error::driver("cuMemcpyHtoD", e))?;
        let mut d_dst = self
            .stream
            .alloc_zeros::<u8>(ds + conv.dst_bytes)
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        {
            let (src_ptr, _read) = d_src.device_ptr(&self.stream);
            let (dst_ptr, _write) = d_dst.device_ptr_mut(&self.stream);
            // SAFETY: the buffers were allocated above with `ss` and `ds` bytes before the
            // sizes `conv` needs, and live until the copy back below synchronises.
            unsafe {
                self.launch_conversion(
                    &conv,
                    src_ptr + ss as u64,
                    dst_ptr + ds as u64,
                    &self.stream,
                )
            }?;
        }
        let out = self
            .stream
            .clone_dtoh(&d_dst)
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
        Ok(out[ds..].to_vec())
    }

    /// Launches the kernels of `conv` on `stream` for buffers at any element-aligned address:
    /// buffers that start mid-vector (a tensor view) take kernels generated for their shift
    /// from the 16-byte boundary ([`BufferShift`]). Errors for an address that is not a
    /// whole number of elements.
    ///
    /// # Safety
    /// `src` and `dst` address device buffers of `conv.src_bytes` and `conv.dst_bytes` bytes.
    pub(crate) unsafe fn launch_conversion(
        &self,
        conv: &DeviceConversion,
        src: u64,
        dst: u64,
        stream: &Arc<CudaStream>,
    ) -> Result<(), Error> {
        let (es, ed) = (
            conv.cast.src.size_bytes() as u64,
            conv.cast.dst.size_bytes() as u64,
        );
        if !src.is_multiple_of(es) || !dst.is_multiple_of(ed) {
            return Err(Error::Unsupported(format!(
                "device buffers must start on a whole element: source at {src:#x} ({} bytes an \
                 element), destination at {dst:#x} ({} bytes)",
                es, ed
            )));
        }
        let shift = BufferShift {
            src: (src % 16 / es) as usize,
            dst: (dst % 16 / ed) as usize,
        };
        if shift == BufferShift::default() {
            // SAFETY: the caller's contract.
            return unsafe { self.launch_all(conv, &conv.launches, src, dst, stream) };
        }
        let launches = self.shifted_launches(conv, shift)?;
        // SAFETY: the caller's contract; the shifted kernels take the addresses moved back to
        // the 16-byte boundary and touch nothing before `src` and `dst` (`generate_shifted`).
        unsafe {
            self.launch_all(
                conv,
                &launches,
                src - shift.src as u64 * es,
                dst - shift.dst as u64 * ed,
                stream,
            )
        }
    }

    /// The kernels of `conv` for buffers `shift` elements past a 16-byte boundary: compiled
    /// (or found in the caches) on first use and kept with `conv`.
    fn shifted_launches(
        &self,
        conv: &DeviceConversion,
        shift: BufferShift,
    ) -> Result<ShiftedLaunches, Error> {
        let mut known = conv
            .shifted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, l)) = known.iter().find(|(s, _)| *s == shift) {
            return Ok(l.clone());
        }
        let launches = Arc::new(
            generate_shifted(&conv.plan, &conv.cast, &conv.tuning, shift)?
                .into_iter()
                .map(|l| {
                    let f = self.compiled(&l.source, l.name, Vec::new())?;
                    Ok((l, f))
                })
                .collect::<Result<Vec<_>, Error>>()?,
        );
        known.push((shift, launches.clone()));
        Ok(launches)
    }
}

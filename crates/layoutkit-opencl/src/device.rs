use std::cell::RefCell;
use std::collections::HashMap;

use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::Kernel;
use opencl3::platform::get_platforms;
use opencl3::program::Program;

use crate::Error;

/// What a device is and what it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub platform: String,
    pub name: String,
    pub vendor: String,
    pub version: String,
    pub image_support: bool,
    /// `CL_DEVICE_IMAGE2D_MAX_WIDTH`, `CL_DEVICE_IMAGE2D_MAX_HEIGHT`.
    pub image2d_max: (usize, usize),
    /// Whether the device has `cl_khr_fp16` (not needed: half data goes through
    /// `vload_half`/`vstore_half_rte` and `CL_HALF_FLOAT` images).
    pub fp16: bool,
}

/// An OpenCL device with its context, a profiling queue and a cache of compiled kernels.
pub struct OpenCl {
    pub(crate) context: Context,
    pub(crate) queue: CommandQueue,
    pub(crate) info: DeviceInfo,
    pub(crate) kernels: RefCell<HashMap<String, (Program, Kernel)>>,
}

fn info_of(platform: &str, d: &Device) -> Result<DeviceInfo, Error> {
    let q = |e| Error::cl("clGetDeviceInfo", e);
    Ok(DeviceInfo {
        platform: platform.to_string(),
        name: d.name().map_err(q)?.trim().to_string(),
        vendor: d.vendor().map_err(q)?.trim().to_string(),
        version: d.version().map_err(q)?.trim().to_string(),
        image_support: d.image_support().map_err(q)?,
        image2d_max: (
            d.image2d_max_width().map_err(q)?,
            d.image2d_max_height().map_err(q)?,
        ),
        fp16: d.extensions().map_err(q)?.contains("cl_khr_fp16"),
    })
}

/// Every device of every platform, with its platform name.
fn all_devices() -> Result<Vec<(String, Device)>, Error> {
    let platforms = get_platforms().map_err(|e| {
        Error::NoDevice(format!(
            "cannot load the OpenCL library or list platforms ({e}); install an OpenCL ICD such as pocl-opencl-icd"
        ))
    })?;
    let mut out = Vec::new();
    for p in platforms {
        let pname = p.name().unwrap_or_default();
        for id in p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default() {
            out.push((pname.clone(), Device::new(id)));
        }
    }
    Ok(out)
}

impl OpenCl {
    /// Every OpenCL device this machine has.
    pub fn devices() -> Result<Vec<DeviceInfo>, Error> {
        all_devices()?.iter().map(|(p, d)| info_of(p, d)).collect()
    }

    /// Opens a device: the first whose platform or device name contains `selector` (or the
    /// `LAYOUTKIT_OPENCL_DEVICE` environment variable), else the first GPU, else the first
    /// device.
    pub fn new(selector: Option<&str>) -> Result<OpenCl, Error> {
        let env = std::env::var("LAYOUTKIT_OPENCL_DEVICE").ok();
        let selector = selector.map(str::to_string).or(env);
        let devices = all_devices()?;
        if devices.is_empty() {
            return Err(Error::NoDevice("no OpenCL platform has a device".into()));
        }
        let pick = match &selector {
            Some(s) => {
                let s = s.to_lowercase();
                devices.iter().find(|(p, d)| {
                    p.to_lowercase().contains(&s)
                        || d.name().unwrap_or_default().to_lowercase().contains(&s)
                })
            }
            None => devices
                .iter()
                .find(|(_, d)| d.dev_type().unwrap_or(0) & CL_DEVICE_TYPE_GPU != 0)
                .or_else(|| devices.first()),
        };
        let Some((platform, device)) = pick else {
            let names: Vec<String> = devices
                .iter()
                .map(|(p, d)| format!("{p}: {}", d.name().unwrap_or_default()))
                .collect();
            return Err(Error::NoDevice(format!(
                "no device matches `{}`; devices: {}",
                selector.unwrap_or_default(),
                names.join("; ")
            )));
        };
        let info = info_of(platform, device)?;
        let context = Context::from_device(device).map_err(|e| Error::cl("clCreateContext", e))?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, CL_QUEUE_PROFILING_ENABLE)
            .map_err(|e| Error::cl("clCreateCommandQueue", e))?;
        Ok(OpenCl {
            context,
            queue,
            info,
            kernels: RefCell::new(HashMap::new()),
        })
    }

    /// The device in use.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }
}

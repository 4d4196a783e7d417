//! Built without the `cuda` feature: the same names, and every constructor says why no GPU.

use std::sync::Arc;

use crate::error::{Error, Result};

/// A CUDA device. Without the `cuda` feature none can be opened.
#[derive(Debug)]
pub struct Gpu {
    _never: std::convert::Infallible,
}

const WHY: &str = "segsparse was built without the `cuda` feature";

impl Gpu {
    /// How many CUDA devices this process can see: always 0 in this build.
    pub fn device_count() -> usize {
        0
    }
    /// Always [`Error::CudaUnavailable`] in this build.
    pub fn new() -> Result<Arc<Gpu>> {
        Err(Error::CudaUnavailable(WHY.into()))
    }
    /// Always [`Error::CudaUnavailable`] in this build.
    pub fn shared() -> Result<Arc<Gpu>> {
        Err(Error::CudaUnavailable(WHY.into()))
    }
    /// The device's name (never reached in this build).
    pub fn name(&self) -> &str {
        match self._never {}
    }
}

/// Whether the NVRTC library can be loaded: never in this build.
pub fn nvrtc_present() -> bool {
    false
}

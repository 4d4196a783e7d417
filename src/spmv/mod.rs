//! Sparse matrix–vector products `y ← α·A·x + β·y` on the CPU and the GPU.

#[cfg(feature = "cuda")]
pub mod gpu;

//! Scan, segmented scan and the primitives built on them, on the CPU and the GPU.

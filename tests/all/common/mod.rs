//! Fixtures shared by several test modules.

pub mod blocks;
pub mod cli;
pub mod dist;
pub mod mtx;
pub mod solve;

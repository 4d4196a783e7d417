//! Matrix Market reading and writing (`.mtx` and `.mtx.gz`).

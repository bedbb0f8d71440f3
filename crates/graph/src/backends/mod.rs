//! Backends that execute graph nodes. Each backend is a set of plain
//! kernels over buffers; the executor maps nodes onto them.

pub mod cpu;

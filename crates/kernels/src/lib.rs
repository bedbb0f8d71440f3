//! The numeric floor of minfer: ggml block formats, dequantization and
//! quantization, dot products (scalar reference, AVX2, AVX-512), matrix
//! products and the persistent thread pool.
//!
//! The SIMD path is picked once, at start-up, with [`SimdLevel::select`];
//! nothing in here reads the environment.

pub mod activation;
pub mod blocks;
mod contention;
pub mod dequant;
pub mod dot;
mod error;
pub mod gelu;
pub mod iq_grids;
pub mod matmul;
mod operand;
pub mod packed;
pub mod pool;
pub mod quant;
pub mod rows;
pub mod simd;
pub mod softmax;

pub use dot::{act_type, scale_table, scale_table_len, Dot4Fn, DotFn, DotKernel, Kernels};
pub use error::KernelError;
pub use matmul::{matmul, matmul_many};
pub use minfer_gguf::GgmlType;
pub use operand::{ActScratch, Layout, MatRef, Product};
pub use rows::{f16_to_f32_row, f32_to_f16_row, HeadRows, RowKernels, Rows};
pub use simd::{Isa, SimdLevel};

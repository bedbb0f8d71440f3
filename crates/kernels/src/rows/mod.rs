//! Rows of f16 values (raw IEEE half bits, as a half-precision KV cache
//! stores them) and of f32 values: bulk conversion between the two, and
//! the two loops attention runs over a cache, the scores of one query
//! against a gathered set of rows and the weighted sum of such rows.
//!
//! Every routine has a scalar reference and an x86 path that converts eight
//! halves per instruction (F16C) and does eight f32 lanes per instruction
//! (AVX); the weighted sum also has a sixteen-lane AVX-512 form. All give
//! the same bits:
//! - f16 → f32 is exact;
//! - f32 → f16 rounds to nearest even in both (checked against a
//!   bit-level reference by the tests);
//! - the dot products keep eight partial sums, lane `l` taking the
//!   elements `l, l + 8, …`, combined in the fixed order of
//!   [`dot_f32`]; every step is a separate f32 multiply and add (never a
//!   fused multiply-add), so vector and scalar code round identically.
//!
//! NaN stays NaN on both paths; its payload is not part of the contract.
//!
//! The path is a [`RowKernels`] value, chosen once and passed around; the
//! free functions use [`RowKernels::detect`], which probes the CPU on first
//! use only.

mod cols;
mod heads;
mod kernels;
#[cfg(target_arch = "x86_64")]
mod pairs;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod wide;
/// The AVX + F16C path.
#[cfg(target_arch = "x86_64")]
mod x86;

pub use heads::HeadRows;
pub use kernels::{f16_to_f32_row, f32_to_f16_row, RowKernels};
pub use scalar::{dot_f32, Rows};

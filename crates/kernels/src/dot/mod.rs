//! Dot products of one weight row with one quantized activation row,
//! following llama.cpp's pairing: legacy types, IQ4_NL and MXFP4 with Q8_0 (Q8_1
//! for the types with a minimum), K-quants, IQ4_XS and the grid types
//! (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S) with Q8_K, float types
//! with f32.
//!
//! [`DotKernel`]s are handed out by [`Kernels`], which is created once for a
//! SIMD level that the CPU supports; that check is what makes the SIMD
//! function pointers safe to call.

pub mod scalar;
pub mod scalar_iq;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_iq;

use crate::blocks::*;
use crate::error::KernelError;
use crate::rows::RowKernels;
use crate::simd::{Isa, SimdLevel};
use minfer_gguf::GgmlType;

/// A dot product over raw rows: `n` elements of weights (`w`, in the weight
/// type) against activations (`a`, in the kernel's activation type). Both
/// byte lengths must match `n`; callers check that once per matrix.
pub type DotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;

/// One weight row against four activation rows at once: the weight blocks
/// are unpacked once and reused, which is what makes prefill cheaper per
/// token than decode. Each result is bit-identical to the [`DotFn`] of the
/// same kernel on that pair.
///
/// `table` holds, per activation row, its block scales widened to f32 (see
/// [`scale_table`]); it is empty for activation types whose scales are f32
/// already (Q8_K).
pub type Dot4Fn = fn(n: usize, w: &[u8], a: [&[u8]; 4], table: [&[f32]; 4]) -> [f32; 4];

/// Length of one activation row's scale table for [`Dot4Fn`]: the `d` of
/// every 32-block, then for Q8_1 the `s` of every block; 0 for other types.
pub fn scale_table_len(act: GgmlType, n: usize) -> usize {
    match act {
        GgmlType::Q8_0 => n / QK,
        GgmlType::Q8_1 => 2 * (n / QK),
        _ => 0,
    }
}

/// Fills `table` (of [`scale_table_len`] values) from one quantized
/// activation row `a` of type `act`. The f16 to f32 widening is exact, so
/// the four-row kernels see the very values the blocks hold.
pub fn scale_table(act: GgmlType, a: &[u8], table: &mut [f32]) {
    match act {
        GgmlType::Q8_0 => {
            for (t, b) in table.iter_mut().zip(blocks::<BlockQ8_0>(a)) {
                *t = f16_to_f32(b.d);
            }
        }
        GgmlType::Q8_1 => {
            let b = blocks::<BlockQ8_1>(a);
            let (d, s) = table.split_at_mut(b.len().min(table.len()));
            for ((d, s), b) in d.iter_mut().zip(s.iter_mut()).zip(b) {
                *d = f16_to_f32(b.d);
                *s = f16_to_f32(b.s);
            }
        }
        _ => {}
    }
}

/// The dot product for one weight type at one SIMD level.
#[derive(Clone, Copy)]
pub struct DotKernel {
    /// Weight type.
    pub weight: GgmlType,
    /// Activation format the weights are dotted with.
    pub act: GgmlType,
    /// The dot product itself.
    pub dot: DotFn,
    /// The four-row form, where this level has one for the type.
    pub dot4: Option<Dot4Fn>,
    /// The level this kernel was compiled for (lower than requested when a
    /// type has no faster version).
    pub level: SimdLevel,
}

/// The activation format that weights of type `ty` are dotted with.
pub fn act_type(ty: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS => Q8_K,
        IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S => Q8_K,
        F32 | F16 | BF16 => F32,
        _ => return None,
    })
}

#[inline(always)]
fn blocks<T: bytemuck::Pod>(b: &[u8]) -> &[T] {
    // Lengths and alignment are checked by the matrix entry points; a
    // mismatch here is a bug in the caller, not bad input.
    bytemuck::cast_slice(b)
}

macro_rules! scalar_fn {
    ($name:ident, $wt:ty, $at:ty) => {
        scalar_fn!(scalar, $name, $wt, $at);
    };
    ($module:ident, $name:ident, $wt:ty, $at:ty) => {
        pub(super) fn $name(_n: usize, w: &[u8], a: &[u8]) -> f32 {
            $module::$name(blocks::<$wt>(w), blocks::<$at>(a))
        }
    };
}

mod scalar_entry {
    use super::*;
    scalar_fn!(dot_q4_0, BlockQ4_0, BlockQ8_0);
    scalar_fn!(dot_q4_1, BlockQ4_1, BlockQ8_1);
    scalar_fn!(dot_q5_0, BlockQ5_0, BlockQ8_0);
    scalar_fn!(dot_q5_1, BlockQ5_1, BlockQ8_1);
    scalar_fn!(dot_q8_0, BlockQ8_0, BlockQ8_0);
    scalar_fn!(dot_iq4_nl, BlockIQ4NL, BlockQ8_0);
    scalar_fn!(dot_mxfp4, BlockMXFP4, BlockQ8_0);
    scalar_fn!(dot_q2_k, BlockQ2K, BlockQ8K);
    scalar_fn!(dot_q3_k, BlockQ3K, BlockQ8K);
    scalar_fn!(dot_q4_k, BlockQ4K, BlockQ8K);
    scalar_fn!(dot_q5_k, BlockQ5K, BlockQ8K);
    scalar_fn!(dot_q6_k, BlockQ6K, BlockQ8K);
    scalar_fn!(dot_iq4_xs, BlockIQ4XS, BlockQ8K);
    scalar_fn!(dot_f32, f32, f32);
    scalar_fn!(dot_f16, F16Bits, f32);
    scalar_fn!(dot_bf16, [u8; 2], f32);
    scalar_fn!(scalar_iq, dot_iq2_xxs, BlockIQ2XXS, BlockQ8K);
    scalar_fn!(scalar_iq, dot_iq2_xs, BlockIQ2XS, BlockQ8K);
    scalar_fn!(scalar_iq, dot_iq2_s, BlockIQ2S, BlockQ8K);
    scalar_fn!(scalar_iq, dot_iq3_xxs, BlockIQ3XXS, BlockQ8K);
    scalar_fn!(scalar_iq, dot_iq3_s, BlockIQ3S, BlockQ8K);
    scalar_fn!(scalar_iq, dot_iq1_s, BlockIQ1S, BlockQ8K);
}

#[cfg(target_arch = "x86_64")]
macro_rules! simd_fn {
    ($module:ident, $name:ident, $wt:ty, $at:ty) => {
        pub(super) fn $name(_n: usize, w: &[u8], a: &[u8]) -> f32 {
            // SAFETY: only reachable through `Kernels`, which is created only
            // for levels the CPU supports.
            unsafe { super::$module::$name(blocks::<$wt>(w), blocks::<$at>(a)) }
        }
    };
}

#[cfg(target_arch = "x86_64")]
macro_rules! simd_fn4 {
    ($module:ident, $name:ident, $wt:ty, $at:ty) => {
        pub(super) fn $name(_n: usize, w: &[u8], a: [&[u8]; 4], table: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: as for `simd_fn`.
            unsafe { super::$module::$name(blocks::<$wt>(w), a.map(blocks::<$at>), table) }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2_entry4 {
    use super::*;
    simd_fn4!(avx2, dot4_q4_0, BlockQ4_0, BlockQ8_0);
    simd_fn4!(avx2, dot4_q4_1, BlockQ4_1, BlockQ8_1);
    simd_fn4!(avx2, dot4_q5_0, BlockQ5_0, BlockQ8_0);
    simd_fn4!(avx2, dot4_q5_1, BlockQ5_1, BlockQ8_1);
    simd_fn4!(avx2, dot4_q8_0, BlockQ8_0, BlockQ8_0);
    simd_fn4!(avx2, dot4_iq4_nl, BlockIQ4NL, BlockQ8_0);
    simd_fn4!(avx2, dot4_mxfp4, BlockMXFP4, BlockQ8_0);
    simd_fn4!(avx2, dot4_q4_k, BlockQ4K, BlockQ8K);
    simd_fn4!(avx2, dot4_q5_k, BlockQ5K, BlockQ8K);
    simd_fn4!(avx2, dot4_q6_k, BlockQ6K, BlockQ8K);
}

#[cfg(target_arch = "x86_64")]
fn avx2_kernel4(ty: GgmlType) -> Option<Dot4Fn> {
    use avx2_entry4::*;
    use GgmlType::*;
    Some(match ty {
        Q4_0 => dot4_q4_0,
        Q4_1 => dot4_q4_1,
        Q5_0 => dot4_q5_0,
        Q5_1 => dot4_q5_1,
        Q8_0 => dot4_q8_0,
        IQ4_NL => dot4_iq4_nl,
        MXFP4 => dot4_mxfp4,
        Q4_K => dot4_q4_k,
        Q5_K => dot4_q5_k,
        Q6_K => dot4_q6_k,
        _ => return None,
    })
}

#[cfg(target_arch = "x86_64")]
mod avx2_entry {
    use super::*;
    simd_fn!(avx2, dot_q4_0, BlockQ4_0, BlockQ8_0);
    simd_fn!(avx2, dot_q4_1, BlockQ4_1, BlockQ8_1);
    simd_fn!(avx2, dot_q5_0, BlockQ5_0, BlockQ8_0);
    simd_fn!(avx2, dot_q5_1, BlockQ5_1, BlockQ8_1);
    simd_fn!(avx2, dot_q8_0, BlockQ8_0, BlockQ8_0);
    simd_fn!(avx2, dot_iq4_nl, BlockIQ4NL, BlockQ8_0);
    simd_fn!(avx2, dot_mxfp4, BlockMXFP4, BlockQ8_0);
    simd_fn!(avx2, dot_q4_k, BlockQ4K, BlockQ8K);
    simd_fn!(avx2, dot_q5_k, BlockQ5K, BlockQ8K);
    simd_fn!(avx2, dot_q6_k, BlockQ6K, BlockQ8K);
    simd_fn!(avx2, dot_iq4_xs, BlockIQ4XS, BlockQ8K);
    simd_fn!(avx2, dot_f32, f32, f32);
    simd_fn!(avx2, dot_f16, F16Bits, f32);
    simd_fn!(avx2, dot_iq2_xxs, BlockIQ2XXS, BlockQ8K);
    simd_fn!(avx2, dot_iq2_xs, BlockIQ2XS, BlockQ8K);
    simd_fn!(avx2, dot_iq2_s, BlockIQ2S, BlockQ8K);
    simd_fn!(avx2, dot_iq3_xxs, BlockIQ3XXS, BlockQ8K);
    simd_fn!(avx2, dot_iq3_s, BlockIQ3S, BlockQ8K);
    simd_fn!(avx2, dot_iq1_s, BlockIQ1S, BlockQ8K);
}

#[cfg(target_arch = "x86_64")]
mod avx512_entry {
    use super::*;
    simd_fn!(avx512, dot_q4_k, BlockQ4K, BlockQ8K);
    simd_fn!(avx512, dot_q5_k, BlockQ5K, BlockQ8K);
    simd_fn!(avx512, dot_q6_k, BlockQ6K, BlockQ8K);
    simd_fn!(avx512, dot_q4_k_vnni, BlockQ4K, BlockQ8K);
    simd_fn!(avx512, dot_q5_k_vnni, BlockQ5K, BlockQ8K);
    simd_fn!(avx512, dot_q6_k_vnni, BlockQ6K, BlockQ8K);
    simd_fn!(avx512, dot_iq2_xxs, BlockIQ2XXS, BlockQ8K);
    simd_fn!(avx512, dot_iq2_xs, BlockIQ2XS, BlockQ8K);
    simd_fn!(avx512, dot_iq2_s, BlockIQ2S, BlockQ8K);
    simd_fn!(avx512, dot_iq3_s, BlockIQ3S, BlockQ8K);
    simd_fn!(avx512, dot_iq1_s, BlockIQ1S, BlockQ8K);
    simd_fn!(avx512, dot_iq2_xxs_vnni, BlockIQ2XXS, BlockQ8K);
    simd_fn!(avx512, dot_iq2_xs_vnni, BlockIQ2XS, BlockQ8K);
    simd_fn!(avx512, dot_iq2_s_vnni, BlockIQ2S, BlockQ8K);
    simd_fn!(avx512, dot_iq3_s_vnni, BlockIQ3S, BlockQ8K);
    simd_fn!(avx512, dot_iq1_s_vnni, BlockIQ1S, BlockQ8K);
}

fn scalar_kernel(ty: GgmlType) -> Option<DotFn> {
    use scalar_entry::*;
    use GgmlType::*;
    Some(match ty {
        Q4_0 => dot_q4_0,
        Q4_1 => dot_q4_1,
        Q5_0 => dot_q5_0,
        Q5_1 => dot_q5_1,
        Q8_0 => dot_q8_0,
        IQ4_NL => dot_iq4_nl,
        MXFP4 => dot_mxfp4,
        Q2_K => dot_q2_k,
        Q3_K => dot_q3_k,
        Q4_K => dot_q4_k,
        Q5_K => dot_q5_k,
        Q6_K => dot_q6_k,
        IQ4_XS => dot_iq4_xs,
        IQ2_XXS => dot_iq2_xxs,
        IQ2_XS => dot_iq2_xs,
        IQ2_S => dot_iq2_s,
        IQ3_XXS => dot_iq3_xxs,
        IQ3_S => dot_iq3_s,
        IQ1_S => dot_iq1_s,
        F32 => dot_f32,
        F16 => dot_f16,
        BF16 => dot_bf16,
        _ => return None,
    })
}

#[cfg(target_arch = "x86_64")]
fn avx2_kernel(ty: GgmlType) -> Option<DotFn> {
    use avx2_entry::*;
    use GgmlType::*;
    Some(match ty {
        Q4_0 => dot_q4_0,
        Q4_1 => dot_q4_1,
        Q5_0 => dot_q5_0,
        Q5_1 => dot_q5_1,
        Q8_0 => dot_q8_0,
        IQ4_NL => dot_iq4_nl,
        MXFP4 => dot_mxfp4,
        Q4_K => dot_q4_k,
        Q5_K => dot_q5_k,
        Q6_K => dot_q6_k,
        IQ4_XS => dot_iq4_xs,
        IQ2_XXS => dot_iq2_xxs,
        IQ2_XS => dot_iq2_xs,
        IQ2_S => dot_iq2_s,
        IQ3_XXS => dot_iq3_xxs,
        IQ3_S => dot_iq3_s,
        IQ1_S => dot_iq1_s,
        F32 => dot_f32,
        F16 => dot_f16,
        _ => return None,
    })
}

/// The AVX-512 kernel of `ty`, where one beats AVX2 (the K-quants and the
/// grid types but IQ3_XXS; the others run their AVX2 kernels at this level,
/// see the `avx512` module).
#[cfg(target_arch = "x86_64")]
fn avx512_kernel(ty: GgmlType, vnni: bool) -> Option<DotFn> {
    use avx512_entry::*;
    use GgmlType::*;
    Some(match (ty, vnni) {
        (Q4_K, false) => dot_q4_k,
        (Q5_K, false) => dot_q5_k,
        (Q6_K, false) => dot_q6_k,
        (Q4_K, true) => dot_q4_k_vnni,
        (Q5_K, true) => dot_q5_k_vnni,
        (Q6_K, true) => dot_q6_k_vnni,
        (IQ2_XXS, false) => dot_iq2_xxs,
        (IQ2_XS, false) => dot_iq2_xs,
        (IQ2_S, false) => dot_iq2_s,
        (IQ3_S, false) => dot_iq3_s,
        (IQ1_S, false) => dot_iq1_s,
        (IQ2_XXS, true) => dot_iq2_xxs_vnni,
        (IQ2_XS, true) => dot_iq2_xs_vnni,
        (IQ2_S, true) => dot_iq2_s_vnni,
        (IQ3_S, true) => dot_iq3_s_vnni,
        (IQ1_S, true) => dot_iq1_s_vnni,
        _ => return None,
    })
}

/// The kernel set of one instruction set (see [`Isa`]), with how a lone
/// token's products read each type of interleaved weights on this machine
/// (see [`crate::packed::tuning`]).
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    isa: Isa,
    tuning: crate::packed::TileTuning,
}

impl Kernels {
    /// Kernels for `level`; `Err` when the CPU cannot run it.
    pub fn new(level: SimdLevel) -> Result<Self, KernelError> {
        Isa::new(level).map(Self::for_isa)
    }

    /// Kernels for an instruction set already chosen.
    pub fn for_isa(isa: Isa) -> Self {
        Kernels {
            isa,
            tuning: crate::packed::TileTuning::default(),
        }
    }

    /// Kernels for the best level of this CPU.
    pub fn detect() -> Self {
        Self::for_isa(Isa::detect())
    }

    /// The instruction set these kernels use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The row kernels (attention, activations) of the same instruction
    /// set.
    pub fn rows(&self) -> RowKernels {
        RowKernels::for_isa(self.isa)
    }

    /// Whether the AVX-512 kernels use VNNI.
    pub fn uses_vnni(&self) -> bool {
        self.isa.vnni()
    }

    /// Whether weights of type `ty` are worth repacking into the
    /// interleaved layout (see [`crate::packed`]): the level has a tile
    /// kernel that makes it pay (AVX2 or AVX-512 VNNI) and the type has the
    /// layout.
    pub fn packs(&self, ty: GgmlType) -> bool {
        self.isa.avx2() && crate::packed::Format::of(ty).is_some()
    }

    /// The tile kernels for interleaved weights at this level (the scalar
    /// reference below AVX2: exact, but slow), with this set's tuning.
    pub fn packed_tiles(&self) -> crate::packed::Tiles {
        crate::packed::Tiles::new(self.isa, self.tuning)
    }

    /// These kernels with `tuning` for a lone token's products: the same
    /// results, at another speed.
    pub fn with_tuning(self, tuning: crate::packed::TileTuning) -> Self {
        Kernels { tuning, ..self }
    }

    /// How a lone token's products read each type of interleaved weights.
    pub fn tuning(&self) -> crate::packed::TileTuning {
        self.tuning
    }

    /// Measures the fastest way for a lone token's products to read each
    /// type of interleaved weights among `probes` on `pool`'s threads (see
    /// [`crate::packed::measure::measure`]); pass the result to
    /// [`Self::with_tuning`].
    pub fn measure_tuning(
        &self,
        pool: &crate::pool::ThreadPool,
        probes: &[crate::MatRef],
    ) -> crate::packed::TileTuning {
        crate::packed::measure::measure(&self.packed_tiles(), pool, probes)
    }

    /// The requested level.
    pub fn level(&self) -> SimdLevel {
        self.isa.level()
    }

    /// The fastest dot product for weights of type `ty` at this level.
    pub fn dot(&self, ty: GgmlType) -> Result<DotKernel, KernelError> {
        let unsupported = KernelError::UnsupportedType {
            ty,
            op: "dot product",
        };
        let act = act_type(ty).ok_or(unsupported.clone())?;
        let mut found = None;
        #[cfg(target_arch = "x86_64")]
        {
            if self.isa.avx512() {
                found = avx512_kernel(ty, self.isa.vnni()).map(|f| (f, SimdLevel::Avx512));
            }
            if found.is_none() && self.isa.avx2() {
                found = avx2_kernel(ty).map(|f| (f, SimdLevel::Avx2));
            }
        }
        let (dot, level) = match found {
            Some(k) => k,
            None => (scalar_kernel(ty).ok_or(unsupported)?, SimdLevel::Scalar),
        };
        // Every SIMD kernel is bit-exact with the scalar reference, so the
        // AVX2 four-row form may pair with an AVX-512 single-row one.
        #[allow(unused_mut)]
        let mut dot4 = None;
        #[cfg(target_arch = "x86_64")]
        if self.isa.avx2() {
            dot4 = avx2_kernel4(ty);
        }
        Ok(DotKernel {
            weight: ty,
            act,
            dot,
            dot4,
            level,
        })
    }
}

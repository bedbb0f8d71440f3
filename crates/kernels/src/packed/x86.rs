//! The x86 tile kernels: per instruction set, `#[target_feature]` entry
//! points that instantiate the one driver ([`super::driver`]) for each
//! family and tile height, so that its `#[inline(always)]` body and the
//! family's intrinsics compile with those features, and a safe wrapper
//! that checks the bounds contract and picks the family.

use super::acts::{check_tile, Acts};
use super::avx2::Avx2;
use super::avx512::Avx512;
use super::driver::{tile_k, tile_legacy, KQuant};
use super::iq4xs_x86::IQ4XS;
use super::layout::{Format, Kind};
use super::legacy_x86::Legacy;
use super::q23k_x86::Q23K;
use super::q45k_x86::Q45K;
use super::q6k_x86::Q6K;
use super::shape::Tile;

/// A safe tile kernel `$name` for the instruction set `$S` (`$P` register
/// parts per group) under the target features `$features`.
macro_rules! isa_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $S:ty, $P:literal) => {
        $(#[$doc])*
        pub(super) fn $name(
            f: &Format,
            nb: usize,
            group: &[u8],
            acts: &Acts,
            t0: usize,
            nt: usize,
        ) -> Tile {
            /// Family `K` at the tile height `nt`.
            ///
            /// # Safety
            /// The CPU has the instruction set's features; `group` holds `nb` group-blocks of
            /// `K` and `acts` covers tokens `t0..t0 + nt`.
            #[target_feature(enable = $features)]
            unsafe fn k<K: KQuant<$S>>(
                nb: usize,
                group: &[u8],
                acts: &Acts,
                t0: usize,
                nt: usize,
            ) -> Tile {
                // SAFETY: this function's features and contract are the
                // callee's.
                unsafe { by_height!(nt, tile_k::<_, $P, $S, K>(nb, group, acts, t0)) }
            }

            /// The legacy format `NIB`, `FIFTH`, `MIN`, `CB` at the tile
            /// height `nt`.
            ///
            /// # Safety
            /// The CPU has the instruction set's features; `group` holds `nb` group-blocks of
            /// `f` and `acts` covers tokens `t0..t0 + nt`.
            #[target_feature(enable = $features)]
            unsafe fn legacy<const NIB: bool, const FIFTH: bool, const MIN: bool, const CB: bool>(
                f: &Format,
                nb: usize,
                group: &[u8],
                acts: &Acts,
                t0: usize,
                nt: usize,
            ) -> Tile {
                // SAFETY: this function's features and contract are the
                // callee's.
                unsafe {
                    match nt {
                        4.. => tile_legacy::<4, $P, $S, Legacy<NIB, FIFTH, MIN, CB>>(f, nb, group, acts, t0),
                        3 => tile_legacy::<3, $P, $S, Legacy<NIB, FIFTH, MIN, CB>>(f, nb, group, acts, t0),
                        2 => tile_legacy::<2, $P, $S, Legacy<NIB, FIFTH, MIN, CB>>(f, nb, group, acts, t0),
                        _ => tile_legacy::<1, $P, $S, Legacy<NIB, FIFTH, MIN, CB>>(f, nb, group, acts, t0),
                    }
                }
            }

            check_tile(f, nb, group, acts, t0, nt);
            // SAFETY: `tile_fn` hands this kernel out only when the CPU has
            // the instruction set's features (see the kernel's doc); `check_tile` is the kernels' bounds
            // contract.
            unsafe {
                match f.kind {
                    Kind::Legacy if f.codebook => {
                        legacy::<true, false, false, true>(f, nb, group, acts, t0, nt)
                    }
                    Kind::Legacy => {
                        by_legacy_format!(f, legacy::<.., false>(f, nb, group, acts, t0, nt))
                    }
                    Kind::Q6K => k::<Q6K>(nb, group, acts, t0, nt),
                    Kind::Q45K if f.fifth => k::<Q45K<true>>(nb, group, acts, t0, nt),
                    Kind::Q45K => k::<Q45K<false>>(nb, group, acts, t0, nt),
                    Kind::IQ4XS => k::<IQ4XS>(nb, group, acts, t0, nt),
                    Kind::Q3K | Kind::Q2K if f.min => k::<Q23K<true>>(nb, group, acts, t0, nt),
                    Kind::Q3K | Kind::Q2K => k::<Q23K<false>>(nb, group, acts, t0, nt),
                }
            }
        }
    };
}

isa_tile!(
    /// The AVX2 tile kernel; `tile_fn` hands it out only when the CPU has
    /// AVX2, FMA and F16C.
    avx2_tile,
    "avx2,fma,f16c",
    Avx2<false>,
    2
);

isa_tile!(
    /// The AVX2 tile kernel fused by AVX-VNNI; `tile_fn` hands it out only
    /// for `SimdLevel::Avx2Vnni`, which `Isa::new` grants only on a CPU
    /// with AVX2, FMA, F16C and AVX-VNNI.
    avx_vnni_tile,
    "avx2,fma,f16c,avxvnni",
    Avx2<true>,
    2
);

isa_tile!(
    /// The AVX-512 VNNI tile kernel; `tile_fn` hands it out only when the
    /// CPU has AVX-512 F/BW/VNNI (with AVX2, FMA and F16C, implied on every
    /// such CPU).
    vnni_tile,
    "avx512f,avx512bw,avx512vnni,avx2,fma,f16c",
    Avx512,
    1
);

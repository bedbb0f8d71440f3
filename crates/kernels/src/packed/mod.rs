//! Matrix products over weights repacked at load time into an interleaved
//! layout (see [`layout`]): sixteen rows per group, so the SIMD kernel
//! produces sixteen outputs per register without horizontal sums and
//! reuses each unpacked block across a tile of tokens.
//!
//! Results are bit-identical to the row-wise scalar dot products on the
//! original rows: the integer block sums are exact and the float steps are
//! the same, in the same order (the tests compare every type, shape and
//! token count).

/// `f::<N, G…>(args)` for the tile height `N` (1 to [`TILE`]) that `nt`
/// names: the SIMD kernels are instantiated per height so that their
/// per-token loops unroll into registers.
macro_rules! by_height {
    ($nt:expr, $f:ident::<_ $(, $g:tt)*>($($a:expr),* $(,)?)) => {
        match $nt {
            4.. => $f::<4 $(, $g)*>($($a),*),
            3 => $f::<3 $(, $g)*>($($a),*),
            2 => $f::<2 $(, $g)*>($($a),*),
            _ => $f::<1 $(, $g)*>($($a),*),
        }
    };
}

/// `f::<NIB, FIFTH, MIN, G…>(args)` for the legacy format `fmt`: nibbles
/// or bytes, fifth bits, a minimum (`f::<.., G…>` names the trailing
/// generics).
macro_rules! by_legacy_format {
    ($fmt:expr, $f:ident $(::<.. $(, $g:tt)*>)? ($($a:expr),* $(,)?)) => {
        match ($fmt.nibbles, $fmt.fifth, $fmt.min) {
            (false, _, _) => $f::<false, false, false $($(, $g)*)?>($($a),*),
            (true, false, false) => $f::<true, false, false $($(, $g)*)?>($($a),*),
            (true, false, true) => $f::<true, false, true $($(, $g)*)?>($($a),*),
            (true, true, false) => $f::<true, true, false $($(, $g)*)?>($($a),*),
            (true, true, true) => $f::<true, true, true $($(, $g)*)?>($($a),*),
        }
    };
}

mod acts;
pub mod layout;
pub mod layout_k;
pub mod layout_k23;
mod product;
pub mod scalar;
mod shape;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod driver;
#[cfg(target_arch = "x86_64")]
mod iq4xs_x86;
#[cfg(target_arch = "x86_64")]
mod legacy_x86;
#[cfg(target_arch = "x86_64")]
mod q23k_x86;
#[cfg(target_arch = "x86_64")]
mod q45k_x86;
#[cfg(target_arch = "x86_64")]
mod q6k_x86;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use acts::{Acts, TileFn};
pub use layout::{dequantize_row, pack, pack_groups, packable, unpack_row, Format, Kind};
pub(crate) use product::{matmul, tile_fn};
pub use shape::{Tile, GROUP, TILE};

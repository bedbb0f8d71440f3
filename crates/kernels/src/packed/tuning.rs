//! How a decode step's lone token reads each type of interleaved weights
//! on this machine: which tile kernel runs it and how far ahead it asks
//! for weight bytes, measured on the machine instead of tuned to one CPU.
//!
//! A one-token product reads every weight byte once from memory and does
//! little with it, so its speed is how many reads the core keeps in
//! flight, and that differs between cores and between weight types. On an
//! AMD Zen 4, for one: the AVX2 tile ran a lone token's Q4_K and Q6_K
//! products 5–10 % faster than the AVX-512 one (which executes there as two
//! 256-bit halves and spends more instructions per block), and asking for
//! Q6_K's bytes 8 KiB ahead made it 35–50 % faster, while the same hint
//! made Q4_K, Q5_0 and Q8_0 5–12 % slower than none. So both are measured
//! per type (`super::measure`) when a runtime starts.
//!
//! Every tile kernel gives the scalar reference's bits and the hint only
//! changes timing, so whatever a measurement picks, and a noisy machine
//! may pick differently from one start to the next, the results are the
//! same.

use minfer_gguf::GgmlType;

/// Bytes ahead that the first tile of a group asks for when nothing was
/// measured, and always for tiles of several tokens: measured on Zen 5
/// with one token of Q6_K (18 GB/s from memory without, 34 GB/s with) and
/// on tiles of four tokens in a decode step of several sequences (Q4_K and
/// Q6_K twice as fast with the hint).
pub const DEFAULT_AHEAD: usize = 4096;

/// How a lone token's product reads one type of weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneRow {
    /// Software prefetch distance in KiB; 0 asks for nothing.
    pub ahead_kib: u8,
    /// Run the AVX2 tile (with AVX-VNNI where the CPU has it) instead of
    /// the AVX-512 one. Only on CPUs with both.
    pub narrow: bool,
}

impl OneRow {
    /// The kernels' choice before any measurement.
    pub const DEFAULT: OneRow = OneRow {
        ahead_kib: (DEFAULT_AHEAD >> 10) as u8,
        narrow: false,
    };

    /// The prefetch distance in bytes.
    pub fn ahead(self) -> usize {
        usize::from(self.ahead_kib) << 10
    }
}

/// Ids below this are the ones a [`TileTuning`] keeps (every type with an
/// interleaved layout has one).
const TYPE_IDS: usize = 40;

/// Per weight type, how a lone token's product reads it (see the module
/// documentation). The default is the kernels' fixed choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileTuning {
    one: [OneRow; TYPE_IDS],
}

impl Default for TileTuning {
    fn default() -> Self {
        TileTuning {
            one: [OneRow::DEFAULT; TYPE_IDS],
        }
    }
}

impl TileTuning {
    /// How a lone token's product reads weights of type `ty`.
    pub fn one_row(&self, ty: GgmlType) -> OneRow {
        self.one
            .get(ty.id() as usize)
            .copied()
            .unwrap_or(OneRow::DEFAULT)
    }

    /// Sets [`Self::one_row`] for `ty` (ignored for a type without an
    /// interleaved layout).
    pub fn set_one_row(&mut self, ty: GgmlType, one: OneRow) {
        if let Some(slot) = self.one.get_mut(ty.id() as usize) {
            *slot = one;
        }
    }

    /// The types whose choice differs from the default, as
    /// `Q6_K: 8 KiB ahead, AVX2 tile` lines for a log.
    pub fn describe(&self) -> Vec<String> {
        GgmlType::ALL
            .iter()
            .filter(|&&ty| self.one_row(ty) != OneRow::DEFAULT)
            .map(|&ty| {
                let one = self.one_row(ty);
                let ahead = match one.ahead_kib {
                    0 => "no prefetch".to_string(),
                    k => format!("{k} KiB ahead"),
                };
                let tile = if one.narrow { ", AVX2 tile" } else { "" };
                format!("{}: {ahead}{tile}", ty.name())
            })
            .collect()
    }
}

//! Which instruction-set path the kernels use, chosen once at start-up.

use crate::error::KernelError;

/// An instruction-set level of the x86-64 kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable reference code.
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX2 with AVX-VNNI (the VEX-encoded 256-bit `vpdpbusd`/`vpdpwssd`
    /// of Alder Lake and later Intel cores): the AVX2 kernels with the
    /// byte dot products fused.
    Avx2Vnni,
    /// AVX-512 F/BW/VL, with VNNI used where the CPU has it.
    Avx512,
}

impl SimdLevel {
    /// Every level, lowest first.
    pub const ALL: [SimdLevel; 4] = [
        SimdLevel::Scalar,
        SimdLevel::Avx2,
        SimdLevel::Avx2Vnni,
        SimdLevel::Avx512,
    ];

    /// The name used by the override (`scalar`, `avx2`, `avx2-vnni`,
    /// `avx512`).
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx2Vnni => "avx2-vnni",
            SimdLevel::Avx512 => "avx512",
        }
    }

    /// Parses an override such as `MINFER_SIMD=avx2`.
    pub fn parse(s: &str) -> Result<Self, KernelError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" | "none" | "off" => Ok(SimdLevel::Scalar),
            "avx2" => Ok(SimdLevel::Avx2),
            "avx2-vnni" | "avxvnni" | "avx-vnni" => Ok(SimdLevel::Avx2Vnni),
            "avx512" | "avx-512" => Ok(SimdLevel::Avx512),
            _ => Err(KernelError::UnknownSimd(s.to_string())),
        }
    }

    /// Whether this CPU can run the level.
    pub fn is_supported(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2Vnni => {
                SimdLevel::Avx2.is_supported() && is_x86_feature_detected!("avxvnni")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => {
                SimdLevel::Avx2.is_supported()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Whether the CPU has AVX-512 VNNI (used inside the AVX-512 path).
    pub fn has_vnni() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx512vnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The best level this CPU supports.
    pub fn detect() -> Self {
        Self::ALL
            .into_iter()
            .rev()
            .find(|l| l.is_supported())
            .unwrap_or(SimdLevel::Scalar)
    }

    /// Resolves an optional override (already read from the environment or
    /// the command line by the caller) into a usable level.
    pub fn select(requested: Option<&str>) -> Result<Self, KernelError> {
        match requested {
            None => Ok(Self::detect()),
            Some(s) => {
                let level = Self::parse(s)?;
                if level.is_supported() {
                    Ok(level)
                } else {
                    Err(KernelError::SimdUnavailable(level.name()))
                }
            }
        }
    }

    /// The supported levels, lowest first (for tests and benchmarks).
    pub fn supported() -> Vec<SimdLevel> {
        Self::ALL.into_iter().filter(|l| l.is_supported()).collect()
    }
}

impl std::fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The instruction set the kernels run with: a [`SimdLevel`] validated
/// against the CPU, and whether its byte dot products use VNNI (AVX-VNNI
/// at [`SimdLevel::Avx2Vnni`], AVX-512 VNNI at [`SimdLevel::Avx512`] where
/// the CPU has it). Chosen once at
/// start-up; [`crate::Kernels`], [`crate::RowKernels`] and the interleaved
/// tile kernels are all derived from it, so they cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Isa {
    level: SimdLevel,
    vnni: bool,
}

impl Isa {
    /// The portable reference code, on any CPU.
    pub const SCALAR: Isa = Isa {
        level: SimdLevel::Scalar,
        vnni: false,
    };

    /// `level` on this CPU (with VNNI where AVX-512 has it; always at
    /// [`SimdLevel::Avx2Vnni`]).
    ///
    /// # Errors
    /// [`KernelError::SimdUnavailable`] when the CPU cannot run `level`.
    pub fn new(level: SimdLevel) -> Result<Self, KernelError> {
        if level.is_supported() {
            Ok(Isa {
                level,
                vnni: level == SimdLevel::Avx2Vnni
                    || level == SimdLevel::Avx512 && SimdLevel::has_vnni(),
            })
        } else {
            Err(KernelError::SimdUnavailable(level.name()))
        }
    }

    /// The best this CPU supports.
    pub fn detect() -> Self {
        Self::new(SimdLevel::detect()).unwrap_or(Self::SCALAR)
    }

    /// The level.
    pub fn level(self) -> SimdLevel {
        self.level
    }

    /// Whether the byte dot products use VNNI (of the level's width).
    pub fn vnni(self) -> bool {
        self.vnni
    }

    /// AVX2, FMA and F16C are available (any level above scalar).
    pub fn avx2(self) -> bool {
        self.level >= SimdLevel::Avx2
    }

    /// AVX-VNNI (256-bit, VEX) is available to the AVX2 kernels.
    pub fn avx_vnni(self) -> bool {
        self.level == SimdLevel::Avx2Vnni
    }

    /// AVX-512 F/BW/VL are available.
    pub fn avx512(self) -> bool {
        self.level == SimdLevel::Avx512
    }
}

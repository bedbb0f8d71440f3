//! The architectures this crate can build, by their GGUF names.

use crate::error::{ModelError, Result};

/// A supported model architecture (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Qwen2 / Qwen2.5: QKV biases, NeoX RoPE.
    Qwen2,
    /// Llama and its many relatives (SmolLM2, TinyLlama, ...): normal RoPE.
    Llama,
}

impl Arch {
    /// Every supported architecture.
    pub const ALL: [Arch; 2] = [Arch::Qwen2, Arch::Llama];

    /// The GGUF name, which is also the prefix of its metadata keys.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Llama => "llama",
        }
    }

    /// The architecture called `name` in a GGUF file.
    ///
    /// # Errors
    /// [`ModelError::UnknownArchitecture`] naming `name` and the supported
    /// ones.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| ModelError::UnknownArchitecture {
                name: name.to_string(),
                supported: Self::ALL.map(Arch::name).join(", "),
            })
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

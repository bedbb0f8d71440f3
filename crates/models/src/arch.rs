//! The architectures this crate can build, by their GGUF names.

use crate::error::{ModelError, Result};
use crate::registry::FAMILIES;

/// A supported model architecture (`general.architecture`): a handle on
/// one entry of the registry of families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arch(&'static str);

impl Arch {
    /// Every supported architecture, in registry order.
    pub fn all() -> impl Iterator<Item = Arch> {
        FAMILIES.iter().map(|f| Arch(f.name))
    }

    /// The GGUF name, which is also the prefix of its metadata keys.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The architecture called `name` in a GGUF file.
    ///
    /// # Errors
    /// [`ModelError::UnknownArchitecture`] naming `name` and the supported
    /// ones.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::all()
            .find(|a| a.name() == name)
            .ok_or_else(|| ModelError::UnknownArchitecture {
                name: name.to_string(),
                supported: Self::all().map(Arch::name).collect::<Vec<_>>().join(", "),
            })
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

//! The architectures this crate can build, by their GGUF names. Only the
//! registry of families makes them (`Arch::all`, `Arch::from_name`): it
//! alone knows the list.

/// A supported model architecture (`general.architecture`): a handle on
/// one entry of the registry of families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arch(pub(crate) &'static str);

impl Arch {
    /// The GGUF name, which is also the prefix of its metadata keys.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

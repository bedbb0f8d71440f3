//! The vocabulary every part of the graph crate shares: devices, the
//! identities of built graphs and weights, and the sizes of node pools.
//! It sits at the bottom of the crate and imports nothing from it, so
//! that the builder, the allocator, the cache and the backends (in this
//! crate or their own) all depend on it and never on each other for these
//! names.

/// A device that runs nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// The host CPU: the kernels crate on the cache's thread pool.
    Cpu,
    /// The GPU backend the cache was given.
    Gpu,
}

impl Device {
    /// Both devices, in slot-table order.
    pub const ALL: [Device; 2] = [Device::Cpu, Device::Gpu];

    /// Index into per-device tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name, as dumps and traces print it.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
        }
    }
}

/// Node buffers a backend must hold: the length of each pool buffer, by
/// element type. Pools only grow; every graph of a cache shares them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolSizes {
    /// Values of each f32 buffer.
    pub f32: Vec<usize>,
    /// Values of each i32 buffer.
    pub i32: Vec<usize>,
}

/// Identity of one built graph within its cache; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphUid(pub u64);

/// Handle of a registered tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WeightId(pub u32);

//! The buffer layout of a built graph, as the allocator plans it and the
//! backends read it: where each node's value lives on each device, and
//! the copies between devices at split boundaries.

use crate::ir::{InputKind, KvKind, NodeId};
use crate::types::{Device, WeightId};

/// Where a node's value lives while a step runs, on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// No value: the ordering token of a KV store, or a value that is not
    /// on this device.
    None,
    /// Read from the weights (each backend its own resident copy).
    Weight(WeightId),
    /// The first `len` values of f32 pool buffer `buf`.
    F32 {
        /// Index of the pool buffer.
        buf: usize,
        /// Values used.
        len: usize,
    },
    /// The first `len` values of i32 pool buffer `buf`.
    I32 {
        /// Index of the pool buffer.
        buf: usize,
        /// Values used.
        len: usize,
    },
}

impl Slot {
    /// The f32 pool buffer behind the slot, if any.
    pub(crate) fn f32_buf(self) -> Option<usize> {
        match self {
            Slot::F32 { buf, .. } => Some(buf),
            _ => None,
        }
    }
}

/// A value copied from its home device to the other one before a split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The split it is copied in front of; the number of splits means
    /// after the last one (the output read back to the CPU).
    pub before_split: usize,
    /// The node whose value moves.
    pub node: NodeId,
    /// Where it is copied to (it comes from the other device).
    pub to: Device,
    /// For a step input, which one: the window inputs copy only the
    /// filled part of their buffer.
    pub input: Option<InputKind>,
}

/// A KV region a graph reads or writes, and the device that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KvNeed {
    pub layer: usize,
    pub kind: KvKind,
    pub row: usize,
    pub device: Device,
}

/// The buffer layout of one built graph, computed once when it is built.
#[derive(Debug)]
pub struct MemPlan {
    /// Where each node's value lives as seen from each device (its home
    /// buffer, the copy a transfer makes, or [`Slot::None`]), indexed by
    /// [`Device::index`].
    pub slots: [Vec<Slot>; 2],
    /// Each node's home device.
    pub devices: Vec<Device>,
    /// Whether a node writes its result over its first source's buffer.
    pub inplace: Vec<bool>,
    /// The copies between devices, in the order they run.
    pub transfers: Vec<Transfer>,
    /// Highest weight handle the graph reads; the store given at execute
    /// must hold it.
    pub max_weight: Option<WeightId>,
    pub(crate) kv: Vec<KvNeed>,
}

impl MemPlan {
    /// Node `i`'s slot on its home device.
    pub fn home(&self, i: NodeId) -> Slot {
        self.slots[self.devices[i].index()][i]
    }

    /// The slots as seen from `d`.
    pub fn on(&self, d: Device) -> &[Slot] {
        &self.slots[d.index()]
    }
}

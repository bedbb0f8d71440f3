//! The execution core of minfer: a declarative compute graph built once per
//! set of [`GraphParams`] and reused for every step with equal params, with
//! the KV cache held in persistent regions that survive rebuilds.

pub mod alloc;
pub mod backend;
pub mod backends;
pub mod builder;
pub mod cache;
pub mod dump;
mod error;
pub mod export;
pub mod fusion;
pub mod ir;
pub mod kv;
pub mod params;
pub mod splits;
pub mod weights;

pub use alloc::{AllocStats, MemPlan, Slot, Transfer};
pub use backend::{Backend, Device, GraphView, KvInfo, PoolSizes};
pub use backends::cpu::CpuBackend;
pub use builder::{BuiltGraph, GraphBuilder};
pub use cache::{CacheConfig, GraphCache, GraphUid, StepInputs, StepTimings, DEFAULT_CAPACITY};
pub use error::{GraphError, Result};
pub use fusion::FusionReport;
pub use ir::{
    AttnParams, DType, InputKind, KvKind, Node, NodeId, Op, RopeParams, RopeStyle, Shape,
};
/// The kernel choices front ends make, re-exported so that they configure
/// the graph without depending on the kernels crate.
pub use minfer_kernels::{KernelError, SimdLevel};
pub use params::{
    BackendPlan, ComputeParams, Fusion, GraphKind, GraphParams, KvFormat, OutputKind,
};
pub use splits::{assign, Split, TraceConfig};
pub use weights::{WeightId, WeightInfo, WeightStore};

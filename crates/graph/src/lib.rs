//! The execution core of minfer: a declarative compute graph built once per
//! set of [`GraphParams`] and reused for every step with equal params, with
//! the KV cache held in persistent regions that survive rebuilds.

pub mod alloc;
pub mod backend;
pub mod builder;
pub mod cache;
pub mod dump;
mod entry;
mod error;
pub mod export;
pub mod fusion;
pub mod ir;
pub mod kv;
pub mod params;
pub mod plan;
pub mod regions;
pub mod splits;
pub mod step;
pub mod types;
pub mod weights;

pub use alloc::AllocStats;
pub use backend::{Backend, GraphView, HostBackend};
pub use builder::{BuiltGraph, GraphBuilder};
pub use cache::{CacheConfig, GraphCache, DEFAULT_CAPACITY};
pub use error::{GraphError, Result};
pub use fusion::FusionReport;
pub use ir::{
    AttnParams, DType, Gating, InputKind, KvKind, MoeAct, MoeParams, Node, NodeId, Op, RopeParams,
    RopeStyle, Shape, Yarn,
};
/// The kernel choices front ends make, re-exported so that they configure
/// the graph without depending on the kernels crate.
pub use minfer_kernels::{KernelError, SimdLevel};
pub use params::{
    BackendPlan, ComputeParams, Fusion, GraphKind, GraphParams, KvFormat, OutputKind,
};
pub use plan::{MemPlan, Slot, Transfer};
pub use regions::{KvInfo, Region, RegionTable};
pub use splits::{assign, Split, TraceConfig};
pub use step::{StepInputs, StepTimings};
pub use types::{Device, GraphUid, PoolSizes, WeightId};
pub use weights::{WeightInfo, WeightStore};

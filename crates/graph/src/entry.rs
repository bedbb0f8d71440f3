//! One built graph and everything derived from it once, as the cache
//! keeps it and a step runs it.

use crate::builder::BuiltGraph;
use crate::fusion::FusionReport;
use crate::params::GraphParams;
use crate::plan::MemPlan;
use crate::splits::Schedule;
use crate::types::GraphUid;

/// One built graph and everything derived from it once.
pub(crate) struct Entry {
    /// What it was built for.
    pub params: GraphParams,
    /// Its identity in the cache.
    pub uid: GraphUid,
    /// The fused graph.
    pub graph: BuiltGraph,
    /// Its buffer layout.
    pub plan: MemPlan,
    /// Its splits and census.
    pub sched: Schedule,
    /// What fusion did.
    pub report: FusionReport,
}

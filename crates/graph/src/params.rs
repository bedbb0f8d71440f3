//! The identity of a graph. Everything that can change the node list is a
//! field here, and nothing else is: token ids, positions, attention
//! windows and the number of cached tokens are step data, filled into input
//! nodes, so a decode step reuses the graph of the step before it.

/// Prefill (a batch of prompt tokens) or decode (one token per sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphKind {
    /// A batch of more than one token.
    Prefill,
    /// A single token.
    Decode,
}

/// Storage format of the KV regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvFormat {
    /// f32 values, as computed.
    F32,
    /// IEEE half floats, rounded to nearest even on store.
    F16,
    /// ggml Q8_0 blocks (32 values, one f16 scale), quantized on store.
    Q8_0,
}

impl KvFormat {
    /// Parses `f32`, `f16` or `q8_0`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Some(KvFormat::F32),
            "f16" => Some(KvFormat::F16),
            "q8_0" => Some(KvFormat::Q8_0),
            _ => None,
        }
    }
}

/// Which backend runs which nodes. One plan today: everything on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendPlan {
    /// Every node on the CPU backend.
    Cpu,
}

/// Pattern rewrites applied after building; each can be switched off to
/// compare fused and unfused graphs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fusion {
    /// `silu(gate) * up` as one `SwiGlu` node.
    pub swiglu: bool,
    /// RoPE of K and its store into the cache as one `RopeKvStore` node.
    pub rope_kv_store: bool,
}

impl Fusion {
    /// Every fusion on.
    pub const ALL: Fusion = Fusion {
        swiglu: true,
        rope_kv_store: true,
    };
    /// Every fusion off.
    pub const NONE: Fusion = Fusion {
        swiglu: false,
        rope_kv_store: false,
    };
}

/// Settings of a context that reach into the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ComputeParams {
    /// Cells per KV region (the context window).
    pub n_ctx: u32,
    /// Storage format of the KV regions.
    pub kv_format: KvFormat,
    /// Which backend runs which nodes.
    pub backend: BackendPlan,
    /// The pattern rewrites applied after building.
    pub fusion: Fusion,
}

/// The reuse key of a graph: equal params build equal graphs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphParams {
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Rows whose logits are computed (the last layer's FFN and the LM
    /// head run on these rows only).
    pub n_out: u32,
    /// Prefill or decode.
    pub kind: GraphKind,
    /// The context's settings.
    pub compute: ComputeParams,
    /// Bumped whenever weights change, so no graph outlives its weights.
    pub weights_version: u64,
}

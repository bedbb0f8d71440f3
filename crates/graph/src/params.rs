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

/// What a graph's output node holds. Part of the identity: the two end
/// in different nodes, so each has its own cached graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputKind {
    /// The LM head's logits, `[n_vocab, n_out]`.
    Logits,
    /// The final hidden states after the output norm and before the LM
    /// head, `[n_embd, n_out]`: what llama.cpp returns as a decoder
    /// model's embeddings.
    Hidden,
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
    /// Bytes of one cell's row of `row_elems` values: 4 per value for F32,
    /// 2 for F16, 34 per block of 32 values for Q8_0 (the raw format every
    /// backend reads and writes).
    pub fn row_bytes(self, row_elems: usize) -> usize {
        match self {
            KvFormat::F32 => row_elems * 4,
            KvFormat::F16 => row_elems * 2,
            KvFormat::Q8_0 => row_elems / 32 * 34,
        }
    }

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

/// Which backend runs which nodes: the offload plan. It is part of the
/// graph's identity, so a changed plan is a rebuild.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendPlan {
    /// Every node on the CPU backend.
    Cpu,
    /// Layers `first_gpu_layer..` on the GPU backend, the ones before on
    /// the CPU; the final norm and the LM head on the GPU when `output`.
    /// The token-embedding lookup stays on the CPU, as in llama.cpp.
    Gpu {
        /// The first layer that runs on the GPU (the layer count puts
        /// none there).
        first_gpu_layer: u32,
        /// Whether the output part (final norm, LM head) runs on the GPU.
        output: bool,
    },
}

impl BackendPlan {
    /// llama.cpp's `-ngl N` over a model of `n_layer` layers: the last `N`
    /// layers on the GPU, and the output part too when `N > n_layer`
    /// (so `-ngl 999` offloads everything). `N = 0` is the CPU plan.
    pub fn from_gpu_layers(n_gpu_layers: u32, n_layer: u32) -> Self {
        if n_gpu_layers == 0 {
            return BackendPlan::Cpu;
        }
        BackendPlan::Gpu {
            first_gpu_layer: n_layer.saturating_sub(n_gpu_layers),
            output: n_gpu_layers > n_layer,
        }
    }

    /// The device that runs layer `layer` (and holds its KV regions).
    pub fn layer_device(self, layer: usize) -> crate::types::Device {
        match self {
            BackendPlan::Gpu {
                first_gpu_layer, ..
            } if layer >= first_gpu_layer as usize => crate::types::Device::Gpu,
            _ => crate::types::Device::Cpu,
        }
    }

    /// The device of the output part.
    pub fn output_device(self) -> crate::types::Device {
        match self {
            BackendPlan::Gpu { output: true, .. } => crate::types::Device::Gpu,
            _ => crate::types::Device::Cpu,
        }
    }

    /// Whether any node runs on the GPU.
    pub fn uses_gpu(self) -> bool {
        matches!(self, BackendPlan::Gpu { .. })
    }
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
    /// Logits or hidden states.
    pub output: OutputKind,
    /// The context's settings.
    pub compute: ComputeParams,
    /// Bumped whenever weights change, so no graph outlives its weights.
    pub weights_version: u64,
}

impl GraphParams {
    /// The params of a forward of `n_tokens` rows (a decode for one, a
    /// prefill for more) with `n_out` outputs of kind `output`, in context
    /// `compute`, over weights that never change (version 0).
    pub fn forward(n_tokens: u32, n_out: u32, output: OutputKind, compute: ComputeParams) -> Self {
        GraphParams {
            n_tokens,
            n_out,
            kind: if n_tokens == 1 {
                GraphKind::Decode
            } else {
                GraphKind::Prefill
            },
            output,
            compute,
            weights_version: 0,
        }
    }
}

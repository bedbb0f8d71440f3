//! `GraphBuilder`: model code describes a forward pass with it, one named
//! node at a time; shapes are checked as nodes are added.

use std::collections::HashSet;

use crate::error::{GraphError, Result};
use crate::ir::*;
use crate::params::GraphParams;
use crate::types::WeightId;
use crate::weights::WeightStore;
use minfer_gguf::GgmlType;

/// A finished node list with its inputs and output.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltGraph {
    /// The nodes, each after its sources.
    pub nodes: Vec<Node>,
    /// The input node of each kind the graph uses.
    pub inputs: Vec<(InputKind, NodeId)>,
    /// The node whose value is the result (logits).
    pub output: NodeId,
}

impl BuiltGraph {
    /// The node of an input kind, if the graph has one.
    pub fn input(&self, kind: InputKind) -> Option<NodeId> {
        self.inputs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|&(_, n)| n)
    }

    /// Compares two graphs node by node (op, shape, type, sources, name)
    /// and describes the first difference. Equal params must build equal
    /// graphs; this is the check that catches a builder that does not.
    pub fn structural_diff(&self, other: &BuiltGraph) -> Option<String> {
        if self.nodes.len() != other.nodes.len() {
            return Some(format!(
                "node count {} vs {}",
                self.nodes.len(),
                other.nodes.len()
            ));
        }
        for (i, (a, b)) in self.nodes.iter().zip(&other.nodes).enumerate() {
            if a != b {
                return Some(format!("node {i}: {a:?} vs {b:?}"));
            }
        }
        if self.inputs != other.inputs || self.output != other.output {
            return Some("inputs or output differ".into());
        }
        None
    }
}

/// Builds one graph for one set of params.
pub struct GraphBuilder<'w> {
    weights: &'w WeightStore,
    params: GraphParams,
    nodes: Vec<Node>,
    inputs: Vec<(InputKind, NodeId)>,
    weight_nodes: Vec<(WeightId, NodeId)>,
    names: HashSet<String>,
}

impl<'w> GraphBuilder<'w> {
    /// A builder for `params` over `weights`.
    pub fn new(weights: &'w WeightStore, params: GraphParams) -> Self {
        GraphBuilder {
            weights,
            params,
            nodes: Vec::new(),
            inputs: Vec::new(),
            weight_nodes: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// The params being built for.
    pub fn params(&self) -> &GraphParams {
        &self.params
    }

    /// The weights the graph may reference.
    pub fn weights(&self) -> &'w WeightStore {
        self.weights
    }

    /// The shape of a node built so far.
    pub fn shape(&self, id: NodeId) -> Shape {
        self.nodes[id].shape
    }

    fn push(
        &mut self,
        name: String,
        op: Op,
        srcs: Vec<NodeId>,
        shape: Shape,
        dtype: DType,
    ) -> Result<NodeId> {
        if !self.names.insert(name.clone()) {
            return Err(GraphError::Shape {
                node: name,
                op: op.name(),
                msg: "duplicate node name".into(),
            });
        }
        self.nodes.push(Node {
            op,
            srcs,
            shape,
            dtype,
            name,
        });
        Ok(self.nodes.len() - 1)
    }

    fn err<T>(&self, name: &str, op: &'static str, msg: String) -> Result<T> {
        Err(GraphError::Shape {
            node: name.to_string(),
            op,
            msg,
        })
    }

    /// The input node of `kind`, created on first use.
    pub fn input(&mut self, kind: InputKind) -> NodeId {
        if let Some(&(_, id)) = self.inputs.iter().find(|(k, _)| *k == kind) {
            return id;
        }
        let n = self.params.n_tokens as usize;
        let len = match kind {
            InputKind::TokenIds | InputKind::Positions | InputKind::KvCells => n,
            InputKind::WindowOffsets => n + 1,
            InputKind::WindowCells | InputKind::WindowPositions => {
                n * self.params.compute.n_ctx as usize
            }
            InputKind::OutIds => self.params.n_out as usize,
        };
        let name = format!("inp.{kind:?}").to_lowercase();
        let id = self
            .push(name, Op::Input(kind), vec![], [len, 1], DType::I32)
            .expect("input names are unique");
        self.inputs.push((kind, id));
        id
    }

    /// The node of a weight, created on first use.
    pub fn weight(&mut self, w: WeightId) -> NodeId {
        if let Some(&(_, id)) = self.weight_nodes.iter().find(|(x, _)| *x == w) {
            return id;
        }
        let info = self.weights.info(w);
        let (name, shape) = (info.name.clone(), info.shape);
        let id = self
            .push(name, Op::Weight(w), vec![], shape, DType::F32)
            .expect("weight names are unique");
        self.weight_nodes.push((w, id));
        id
    }

    /// Rows `ids` of `table` as f32.
    pub fn get_rows(
        &mut self,
        name: impl Into<String>,
        table: NodeId,
        ids: NodeId,
    ) -> Result<NodeId> {
        let name = name.into();
        if self.nodes[ids].dtype != DType::I32 {
            return self.err(&name, "get_rows", "ids must be i32".into());
        }
        let shape = [self.nodes[table].shape[0], self.nodes[ids].shape[0]];
        self.push(name, Op::GetRows, vec![table, ids], shape, DType::F32)
    }

    /// RMS normalization of each row.
    pub fn rms_norm(&mut self, name: impl Into<String>, x: NodeId, eps: f32) -> Result<NodeId> {
        let shape = self.nodes[x].shape;
        self.push(name.into(), Op::RmsNorm { eps }, vec![x], shape, DType::F32)
    }

    fn binary(&mut self, name: String, op: Op, a: NodeId, b: NodeId) -> Result<NodeId> {
        let (sa, sb) = (self.nodes[a].shape, self.nodes[b].shape);
        if sa[0] != sb[0] || (sb[1] != sa[1] && sb[1] != 1) {
            return self.err(
                &name,
                op.name(),
                format!("cannot broadcast {sb:?} over {sa:?}"),
            );
        }
        self.push(name, op, vec![a, b], sa, DType::F32)
    }

    /// `a + b` (`b` may be one row).
    pub fn add(&mut self, name: impl Into<String>, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(name.into(), Op::Add, a, b)
    }

    /// `a * b` elementwise (`b` may be one row).
    pub fn mul(&mut self, name: impl Into<String>, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(name.into(), Op::Mul, a, b)
    }

    /// `x * s`.
    pub fn scale(&mut self, name: impl Into<String>, x: NodeId, s: f32) -> Result<NodeId> {
        let shape = self.nodes[x].shape;
        self.push(name.into(), Op::Scale(s), vec![x], shape, DType::F32)
    }

    /// `w × x`: one output row per activation row, one value per weight row.
    pub fn mat_mul(&mut self, name: impl Into<String>, w: NodeId, x: NodeId) -> Result<NodeId> {
        let name = name.into();
        let (sw, sx) = (self.nodes[w].shape, self.nodes[x].shape);
        if sw[0] != sx[0] {
            return self.err(
                &name,
                "mat_mul",
                format!("weights {sw:?} × activations {sx:?}"),
            );
        }
        self.push(name, Op::MatMul, vec![w, x], [sw[1], sx[1]], DType::F32)
    }

    fn check_heads(&self, name: &str, x: NodeId, n_head: usize, head_dim: usize) -> Result<()> {
        if self.nodes[x].shape[0] != n_head * head_dim {
            return self.err(
                name,
                "rope",
                format!(
                    "rows of {} are not {n_head} heads × {head_dim}",
                    self.nodes[x].shape[0]
                ),
            );
        }
        Ok(())
    }

    /// Rotary embedding of every head, at the step's positions.
    pub fn rope(&mut self, name: impl Into<String>, x: NodeId, p: RopeParams) -> Result<NodeId> {
        self.rope_ext(name, x, None, p)
    }

    /// Rotary embedding with per-pair frequency factors: pair `i`'s angle
    /// is divided by `factors[i]` (an f32 weight of `n_rot / 2` values,
    /// LongRoPE's `rope_factors_*` or Llama 3's `rope_freqs`), as ggml's
    /// `rope_ext` does. Without factors this is [`GraphBuilder::rope`].
    pub fn rope_ext(
        &mut self,
        name: impl Into<String>,
        x: NodeId,
        factors: Option<WeightId>,
        p: RopeParams,
    ) -> Result<NodeId> {
        let name = name.into();
        if let Some(f) = factors {
            let info = self.weights.info(f);
            if info.ty != GgmlType::F32 || info.shape != [p.n_rot / 2, 1] {
                let msg = format!(
                    "frequency factors {} are {} {:?}, not F32 [{}]",
                    info.name,
                    info.ty.name(),
                    info.shape,
                    p.n_rot / 2
                );
                return self.err(&name, "rope", msg);
            }
        }
        self.check_heads(&name, x, p.n_head, p.head_dim)?;
        if p.n_rot > p.head_dim || !p.n_rot.is_multiple_of(2) {
            return self.err(
                &name,
                "rope",
                format!("n_rot {} vs head_dim {}", p.n_rot, p.head_dim),
            );
        }
        let pos = self.input(InputKind::Positions);
        let shape = self.nodes[x].shape;
        let mut srcs = vec![x, pos];
        srcs.extend(factors.map(|f| self.weight(f)));
        self.push(name, Op::Rope(p), srcs, shape, DType::F32)
    }

    /// Writes `x`'s rows into the layer's K or V region at the step's cells.
    pub fn kv_store(
        &mut self,
        name: impl Into<String>,
        x: NodeId,
        layer: usize,
        kind: KvKind,
    ) -> Result<NodeId> {
        let cells = self.input(InputKind::KvCells);
        self.push(
            name.into(),
            Op::KvStore { layer, kind },
            vec![x, cells],
            [1, 1],
            DType::F32,
        )
    }

    /// Attention of `q` over the layer's cache, ordered after the stores
    /// `k_token` and `v_token`.
    pub fn attention(
        &mut self,
        name: impl Into<String>,
        q: NodeId,
        k_token: NodeId,
        v_token: NodeId,
        p: AttnParams,
    ) -> Result<NodeId> {
        self.attention_with_sinks(name, q, k_token, v_token, None, p)
    }

    /// [`GraphBuilder::attention`] with, optionally, attention sinks: an
    /// f32 weight of one logit per query head (gpt-oss's `attn_sinks`)
    /// that joins each head's softmax as an extra term of the denominator
    /// only, unscaled and with no value (ggml's `soft_max_add_sinks`).
    /// Without sinks this is [`GraphBuilder::attention`].
    pub fn attention_with_sinks(
        &mut self,
        name: impl Into<String>,
        q: NodeId,
        k_token: NodeId,
        v_token: NodeId,
        sinks: Option<WeightId>,
        p: AttnParams,
    ) -> Result<NodeId> {
        let name = name.into();
        if let Some(s) = sinks {
            let info = self.weights.info(s);
            if info.ty != GgmlType::F32 || info.shape != [p.n_head, 1] {
                let msg = format!(
                    "attention sinks {} are {} {:?}, not F32 [{}]",
                    info.name,
                    info.ty.name(),
                    info.shape,
                    p.n_head
                );
                return self.err(&name, "attention", msg);
            }
        }
        self.check_heads(&name, q, p.n_head, p.head_dim)?;
        if p.n_head_kv == 0 || !p.n_head.is_multiple_of(p.n_head_kv) {
            return self.err(
                &name,
                "attention",
                format!("{} heads over {} KV heads", p.n_head, p.n_head_kv),
            );
        }
        let offsets = self.input(InputKind::WindowOffsets);
        let cells = self.input(InputKind::WindowCells);
        let mut srcs = vec![q, k_token, v_token, offsets, cells];
        if p.sliding_window > 0 {
            srcs.push(self.input(InputKind::Positions));
            srcs.push(self.input(InputKind::WindowPositions));
        }
        // Last, so the sources before it keep their places
        // (`AttnParams::sinks_src`).
        srcs.extend(sinks.map(|w| self.weight(w)));
        let shape = self.nodes[q].shape;
        self.push(name, Op::Attention(p), srcs, shape, DType::F32)
    }

    /// `x * sigmoid(x)`.
    pub fn silu(&mut self, name: impl Into<String>, x: NodeId) -> Result<NodeId> {
        let shape = self.nodes[x].shape;
        self.push(name.into(), Op::Silu, vec![x], shape, DType::F32)
    }

    /// `tanh(x)`.
    pub fn tanh(&mut self, name: impl Into<String>, x: NodeId) -> Result<NodeId> {
        let shape = self.nodes[x].shape;
        self.push(name.into(), Op::Tanh, vec![x], shape, DType::F32)
    }

    /// `silu(gate) * up`.
    pub fn swiglu(&mut self, name: impl Into<String>, gate: NodeId, up: NodeId) -> Result<NodeId> {
        let name = name.into();
        if self.nodes[gate].shape != self.nodes[up].shape {
            return self.err(&name, "swiglu", "gate and up differ in shape".into());
        }
        let shape = self.nodes[gate].shape;
        self.push(name, Op::SwiGlu, vec![gate, up], shape, DType::F32)
    }

    /// `gelu(gate) * up` (tanh approximation).
    pub fn geglu(&mut self, name: impl Into<String>, gate: NodeId, up: NodeId) -> Result<NodeId> {
        let name = name.into();
        if self.nodes[gate].shape != self.nodes[up].shape {
            return self.err(&name, "geglu", "gate and up differ in shape".into());
        }
        let shape = self.nodes[gate].shape;
        self.push(name, Op::GeGlu, vec![gate, up], shape, DType::F32)
    }

    /// A routed SwiGLU FFN over `x` (see [`Op::MoeFfn`]): `router` holds
    /// each row's `n_expert` probabilities or logits, `experts` the `up`,
    /// `gate` and `down` weights with their experts stacked.
    pub fn moe_ffn(
        &mut self,
        name: impl Into<String>,
        x: NodeId,
        router: NodeId,
        experts: [NodeId; 3],
        p: MoeParams,
    ) -> Result<NodeId> {
        self.moe_ffn_biased(name, x, router, experts, None, p)
    }

    /// [`GraphBuilder::moe_ffn`] with per-expert biases added to the up,
    /// gate and down products (gpt-oss): F32 weights of `[n_ff, n_expert]`,
    /// `[n_ff, n_expert]` and `[n_embd, n_expert]`, the chosen expert's row
    /// added as llama.cpp's `add_id` does.
    pub fn moe_ffn_biased(
        &mut self,
        name: impl Into<String>,
        x: NodeId,
        router: NodeId,
        experts: [NodeId; 3],
        biases: Option<[WeightId; 3]>,
        p: MoeParams,
    ) -> Result<NodeId> {
        let name = name.into();
        if let Some(b) = biases {
            let d = self.nodes[x].shape[0];
            let want = [[p.n_ff, p.n_expert], [p.n_ff, p.n_expert], [d, p.n_expert]];
            for (w, shape) in b.iter().zip(want) {
                let info = self.weights.info(*w);
                if info.ty != GgmlType::F32 || info.shape != shape {
                    let msg = format!(
                        "expert bias {} is {} {:?}, not F32 {shape:?}",
                        info.name,
                        info.ty.name(),
                        info.shape
                    );
                    return self.err(&name, "moe_ffn", msg);
                }
            }
        }
        let [d, n] = self.nodes[x].shape;
        let [up, gate, down] = experts.map(|e| self.nodes[e].shape);
        let stacked = |per: usize| per.checked_mul(p.n_expert);
        let bad = if p.n_used == 0
            || p.n_used > p.n_expert
            || p.n_used > MoeParams::MAX_USED
            || p.n_ff == 0
        {
            Some(format!(
                "{} of {} experts with {} hidden values each",
                p.n_used, p.n_expert, p.n_ff
            ))
        } else if self.nodes[router].shape != [p.n_expert, n] {
            Some(format!(
                "router {:?} for {n} rows",
                self.nodes[router].shape
            ))
        } else if up != gate
            || up[0] != d
            || Some(up[1]) != stacked(p.n_ff)
            || down[0] != p.n_ff
            || Some(down[1]) != stacked(d)
        {
            Some(format!(
                "experts up {up:?}, gate {gate:?}, down {down:?} for rows of {d}"
            ))
        } else if experts
            .iter()
            .any(|&e| !matches!(self.nodes[e].op, Op::Weight(_)))
        {
            Some("the experts must be weights".into())
        } else {
            None
        };
        if let Some(msg) = bad {
            return self.err(&name, "moe_ffn", msg);
        }
        let mut srcs = vec![x, router, experts[0], experts[1], experts[2]];
        if let Some(b) = biases {
            srcs.extend(b.map(|w| self.weight(w)));
        }
        self.push(name, Op::MoeFfn(p), srcs, [d, n], DType::F32)
    }

    /// Softmax of each row.
    pub fn softmax(&mut self, name: impl Into<String>, x: NodeId) -> Result<NodeId> {
        let shape = self.nodes[x].shape;
        self.push(name.into(), Op::Softmax, vec![x], shape, DType::F32)
    }

    /// The same data with another shape of equal size.
    pub fn reshape(&mut self, name: impl Into<String>, x: NodeId, shape: Shape) -> Result<NodeId> {
        let name = name.into();
        if shape[0] * shape[1] != self.nodes[x].n_elements() {
            return self.err(
                &name,
                "reshape",
                format!("{:?} to {shape:?}", self.nodes[x].shape),
            );
        }
        let dtype = self.nodes[x].dtype;
        self.push(name, Op::Reshape, vec![x], shape, dtype)
    }

    /// Rows `OutIds` of `x`, when fewer rows than tokens are wanted;
    /// otherwise `x` itself.
    pub fn select_outputs(&mut self, name: impl Into<String>, x: NodeId) -> Result<NodeId> {
        let p = self.params;
        if p.n_out >= p.n_tokens {
            return Ok(x);
        }
        let ids = self.input(InputKind::OutIds);
        self.get_rows(name, x, ids)
    }

    /// Ends the build with `output` as the result.
    pub fn finish(self, output: NodeId) -> BuiltGraph {
        BuiltGraph {
            nodes: self.nodes,
            inputs: self.inputs,
            output,
        }
    }
}

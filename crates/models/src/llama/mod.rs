//! Llama and its relatives (SmolLM2, TinyLlama, ...): pre-norm decoder,
//! RoPE on adjacent pairs, optional q/k/v biases. Without `output.weight`
//! the embeddings are tied and the LM head is `token_embd.weight`.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightStore};

use crate::error::{ModelError, Result};
use crate::hparams::HParams;
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family {
    name: "llama",
    load,
};

#[derive(Debug)]
struct Llama(ModelTensors);

/// Resolves llama's tensors. Llama-3 style RoPE frequency factors and
/// mixture-of-experts layers change the math and are refused by name.
fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    let store: &WeightStore = cx.weights;
    if store.get("rope_freqs.weight").is_some() {
        return Err(ModelError::Unsupported(
            "per-dimension RoPE frequency factors (rope_freqs.weight)".into(),
        ));
    }
    if store.get("blk.0.ffn_gate_inp.weight").is_some() {
        return Err(ModelError::Unsupported(
            "mixture-of-experts layers (blk.0.ffn_gate_inp.weight)".into(),
        ));
    }
    let t = layers::resolve_tensors(store, cx.hparams, Biases::Optional, FfnShape::Dense)?;
    Ok(Box::new(Llama(t)))
}

impl Forward for Llama {
    fn tensors(&self) -> &ModelTensors {
        &self.0
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        layers::pre_norm_decoder(b, hp, &self.0, |_| {
            AttnOptions::plain(hp, RopeStyle::Normal)
        })
    }
}

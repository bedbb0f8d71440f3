//! [`Runtime`]: one model serving many sequences, one forward per step.
//!
//! The runtime owns everything that exists once per model: the weights, the
//! thread pool and graph cache (which owns the KV regions), and the cell
//! store that records which cell holds which position of which sequence.
//! The KV regions hold `n_ctx` cells in total, shared by every sequence, as
//! llama.cpp's unified cache does.
//!
//! A [`step`](Runtime::step) evaluates a batch of entries, each a run of
//! tokens appended to one sequence, through one graph evaluation: decode
//! rows of some sequences and prefill chunks of others go through the same
//! pass over the weights. Which sequence a row belongs to, its position and
//! the cells its query reads are step data, so the graph for a given number
//! of rows is reused whatever the mix. Each row is computed the same way
//! whatever else is in the batch, so a sequence's logits do not depend on
//! its neighbours.
//!
//! Sequences that their owner has [released](Runtime::release) stay in the
//! cache, idle, so that a later prompt with the same beginning can share
//! their cells ([`Runtime::new_sequence_for`]). Idle sequences are evicted,
//! least recently used first, as soon as their cells or ids are needed.
//! Below the cells, a prompt cache in host RAM and on disk ([`tier`])
//! keeps released prefixes as their K/V bytes and restores them into
//! fresh cells when a prompt with the same beginning comes back.

mod base;
mod batch;
mod embed;
mod inspect;
mod params;
mod poison;
mod snapshot;
mod tier;
mod types;

pub use base::Runtime;
pub use batch::BatchEntry;
pub(crate) use batch::{Batch, Wanted};
pub use embed::{normalize_l2, Pooling};
pub use snapshot::{KvLayout, SeqSnapshot};
pub use tier::{PromptCacheStats, BLOCK_TOKENS};
pub use types::{CacheUsage, SeqId, StepLogits};

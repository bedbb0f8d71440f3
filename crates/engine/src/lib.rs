//! The engine of minfer, the one door front ends go through.
//!
//! - [`LoadedModel`] loads a model by path or store name with its
//!   tokenizer, chat template and end-of-generation set, and builds prompts
//!   (template, tokenization, context check).
//! - [`Runtime`] serves many sequences of one model: one thread pool, one
//!   graph cache with its KV regions, one cell store shared by every
//!   sequence; a [`step`](Runtime::step) runs rows of many sequences
//!   through one forward pass.
//! - [`Scheduler`] runs generations that callers pull events from, batching
//!   every active one into each step.
//! - [`ChatSession`] is a conversation on one sequence: delta prefill,
//!   context shift, session files ([`chat`]).
//! - [`Runtime::embed`] computes embeddings (final hidden states, pooled
//!   per [`Pooling`] and normalized) on the same runtime.
//! - [`Engine`] is one sequence on its own runtime, for single-stream work
//!   such as [`perplexity`].

pub mod chat;
mod config;
mod device;
mod engine;
mod error;
mod framed;
pub mod generate;
mod identity;
mod load;
pub mod model_facts;
pub mod perplexity;
mod runtime;
pub mod scheduler;
pub mod spec;
mod synthetic;
pub mod trace;
mod vocab;

pub use chat::{ChatSession, ChatStats, TurnStart, TurnStats};
pub use config::{default_cache_ram, CacheDir, EngineConfig, KernelTuning};
pub use device::{list_devices, AdapterDesc, AdapterKind, DeviceChoice};
pub use engine::Engine;
pub use generate::{
    GenerateConfig, GenerationStats, StopReason, TokenLogprobs, Utf8Stream, MAX_TOP_LOGPROBS,
};
pub use load::{check_fits, load_tokenizer, LoadedModel, PromptMode};
pub use model_facts::{MetaArray, MetaValue, ModelFacts, TensorFact};
pub use runtime::{
    normalize_l2, BatchEntry, CacheUsage, KvLayout, Pooling, PromptCacheStats, Runtime, SeqId,
    SeqSnapshot, StepLogits, BLOCK_TOKENS as PROMPT_BLOCK_TOKENS,
};
pub use scheduler::{Event, GenId, GenProgress, GenTimes, Scheduler};
pub use spec::{DraftModel, SpecConfig, SpecStats, Speculation};
pub use synthetic::SyntheticTokens;

pub use error::{EngineError, Result};
pub use minfer_models::WeightBytes;
/// The types front ends pass to the engine, re-exported so that they need
/// no other crate of the workspace.
pub use minfer_sampler::{
    Constraint, Gbnf, Mirostat, SamplingParams, Stage, TokenVocab, Trigger, DEFAULT_SEED,
};
pub use minfer_store::{ModelSpec, Store, StoreConfig};
pub use minfer_text::{ChatMessage, ChatTemplate, Tokenizer};
pub use perplexity::{perplexity, PplResult};
pub use vocab::{check_sampling, token_vocab};

pub use minfer_graph::SimdLevel;
/// Settings that callers of the engine choose, re-exported so that front
/// ends need not depend on the graph or kernel crates.
pub use minfer_graph::{BackendPlan, Device, Fusion, KvFormat};

//! Text in and out of a model: the tokenizer described by a GGUF file's
//! metadata (byte-level BPE or SentencePiece), and the model's chat
//! template.
//!
//! Both follow llama.cpp, the reference this project is tested against:
//! [`Tokenizer::encode`] yields the ids `llama_tokenize` yields for the
//! same file, and [`ChatTemplate::render`] renders the template the way
//! Hugging Face transformers does (Jinja2 with `trim_blocks` and
//! `lstrip_blocks`), which is how the golden renderings were made.
//!
//! # Choices worth knowing
//!
//! - `tokenizer.ggml.model` `gpt2` (byte-level BPE) and `llama`
//!   (SentencePiece, as llama.cpp's `llm_tokenizer_spm`) are supported.
//!   Other models are a [`TextError::UnsupportedModel`] naming them.
//! - Pre-tokenizers (`tokenizer.ggml.pre`): the GPT-2, Llama 3, Qwen 2,
//!   Qwen 3.5 and StarCoder/SmolLM families and llama.cpp's `default`. An
//!   unknown or missing name falls back to `default` and records a warning
//!   ([`Tokenizer::warnings`]); llama.cpp refuses an unknown name instead.
//! - Decoding yields bytes, not `String`: a token may hold part of a UTF-8
//!   character. With `special = true` control tokens render as their text
//!   (llama.cpp's `llama_token_to_piece(.., special = true)`), with `false`
//!   they render as nothing. Pieces are concatenated as they are: the
//!   "clean up tokenization spaces" step of `llama_detokenize` is not
//!   applied.
//! - When the metadata names no end-of-turn token, it is found by text in a
//!   fixed order (`<|eot_id|>`, `<|im_end|>`, …); llama.cpp takes whichever
//!   its hash map yields first. The end-of-generation *set* does not depend
//!   on that choice.
//! - llama.cpp's per-model `lstrip`/`rstrip` attributes (Phi-3, Jina,
//!   ModernBERT special tokens) are not reproduced.
//! - Chat templates get `bos_token` and `eos_token` as empty strings unless
//!   set with [`ChatTemplate::with_special_tokens`], and `strftime_now`
//!   reads the UTC system clock unless one is injected.

mod bpe;
mod bytes;
mod compat;
mod error;
mod fxhash;
mod partition;
mod pretok;
mod pyjson;
mod spm;
mod strftime;
mod template;
mod tokenizer;
mod unicode;
mod vocab;

pub use error::TextError;
pub use strftime::DateTime;
pub use template::{ChatMessage, ChatTemplate};
pub use tokenizer::Tokenizer;
pub use vocab::SpecialIds;

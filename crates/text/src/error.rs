//! The error type of this crate.

use thiserror::Error;

/// Why a tokenizer or a chat template could not be built or used.
#[derive(Debug, Error)]
pub enum TextError {
    /// A metadata key exists but holds the wrong type of value.
    #[error("GGUF metadata: {0}")]
    Metadata(#[from] minfer_gguf::GgufError),

    /// A key the tokenizer cannot work without is absent.
    #[error("GGUF metadata has no `{0}`; the file carries no usable tokenizer")]
    MissingKey(&'static str),

    /// `tokenizer.ggml.model` names a tokenizer family this crate does not
    /// implement (byte-level BPE `gpt2` and SentencePiece `llama` are).
    #[error(
        "unsupported tokenizer model `{0}` (supported: byte-level BPE `gpt2`, SentencePiece `llama`)"
    )]
    UnsupportedModel(String),

    /// A metadata array has an element of the wrong type or a wrong length.
    #[error("GGUF metadata `{key}`: {reason}")]
    BadMetadata {
        /// The offending key.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// The chat template could not be compiled or rendered; the message is
    /// minijinja's, which names the line and the construct.
    #[error("chat template: {0}")]
    Template(String),
}

impl From<minijinja::Error> for TextError {
    fn from(e: minijinja::Error) -> Self {
        // The alternate form appends the template source excerpt that
        // minijinja keeps when debug info is on, which is what a user needs
        // to find the broken construct.
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        TextError::Template(msg)
    }
}

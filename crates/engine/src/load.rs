//! The front door: a model loaded by path or store name with everything a
//! front end needs to turn text into token ids and back, and to start a
//! runtime on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minfer_gguf::GgufFile;
use minfer_models::Model;
use minfer_store::Store;
use minfer_text::{ChatMessage, ChatTemplate, Tokenizer};

use crate::config::EngineConfig;
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::runtime::{Pooling, Runtime};
use crate::scheduler::Scheduler;
use crate::vocab::SharedVocab;
use minfer_sampler::TokenVocab;

/// A model ready to run: its weights, tokenizer, chat template and
/// end-of-generation set, as read from one GGUF file (or split set).
pub struct LoadedModel {
    path: PathBuf,
    file: Arc<GgufFile>,
    model: Arc<Model>,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    /// The sampler vocabulary, built on first use, shared with the
    /// schedulers made from this model.
    vocab: SharedVocab,
}

impl std::fmt::Debug for LoadedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModel")
            .field("path", &self.path)
            .field("arch", &self.model.arch())
            .field("template", &self.template.is_some())
            .finish()
    }
}

/// How a prompt is turned into token ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptMode {
    /// Rendered with the model's chat template (plain text when the model
    /// has none and no system message is given).
    Chat,
    /// Sent as it is; special-token text in it is still parsed.
    Raw,
}

impl LoadedModel {
    /// Resolves `spec` (a file path, a known model name or `hf:…`, pulled
    /// into the store when missing) and loads it.
    ///
    /// # Errors
    /// [`EngineError::Store`] when the model cannot be found or fetched;
    /// [`EngineError::Load`] when the file is not a usable GGUF model
    /// (truncated, unknown architecture, unsupported tensor type, bad
    /// tokenizer or chat template), naming the file.
    pub fn load(store: &Store, spec: &str) -> Result<LoadedModel> {
        let path = store.resolve(spec)?;
        Self::open(&path)
    }

    /// Loads the model in the GGUF file at `path` (any part of a split
    /// model).
    ///
    /// # Errors
    /// [`EngineError::Load`], naming the file and the problem.
    pub fn open(path: &Path) -> Result<LoadedModel> {
        let fail = |what: String| EngineError::Load {
            path: path.to_path_buf(),
            what,
        };
        let t0 = std::time::Instant::now();
        let t_load = crate::trace::rec::start();
        let file = Arc::new(GgufFile::open(path).map_err(|e| fail(e.to_string()))?);
        let model = Arc::new(Model::load(file.clone()).map_err(|e| fail(e.to_string()))?);
        let tokenizer =
            Tokenizer::from_gguf(file.metadata()).map_err(|e| fail(format!("tokenizer: {e}")))?;
        let template = ChatTemplate::from_gguf(file.metadata())
            .map_err(|e| fail(format!("chat template: {e}")))?;
        crate::trace::rec::end(t_load, "engine", "load", file.file_size());
        log_load(path, &file, t0.elapsed());
        Ok(LoadedModel {
            path: path.to_path_buf(),
            file,
            model,
            tokenizer,
            template,
            vocab: SharedVocab::default(),
        })
    }

    /// The file the model was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The GGUF file (metadata, tensor table, size).
    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }

    /// The model's weights and hyperparameters.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The tokenizer (and its end-of-generation set).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The sampler's view of the vocabulary (for grammars and DRY), built
    /// the first time anything asks for it and then shared: the schedulers
    /// made by [`scheduler`](LoadedModel::scheduler) use the same one.
    ///
    /// # Errors
    /// As [`token_vocab`](crate::token_vocab) (never for a loaded model).
    pub fn sampler_vocab(&self) -> Result<Arc<TokenVocab>> {
        self.vocab.get(&self.tokenizer)
    }

    /// The chat template, when the model has one.
    pub fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// The model's name from its metadata, or its file name.
    pub fn name(&self) -> String {
        self.file
            .metadata()
            .get_str("general.name")
            .ok()
            .flatten()
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
    }

    /// The pooling the model's file asks for embeddings
    /// ([`Pooling::from_gguf`]).
    ///
    /// # Errors
    /// As [`Pooling::from_gguf`].
    pub fn pooling(&self) -> Result<Pooling> {
        Pooling::from_gguf(&self.file)
    }

    /// Renders a conversation with the chat template, ready for the
    /// assistant's answer when `add_generation_prompt`.
    ///
    /// # Errors
    /// [`EngineError::NoTemplate`] when the model has no chat template;
    /// [`EngineError::Template`] when the template cannot render these
    /// messages.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let t = self.template.as_ref().ok_or(EngineError::NoTemplate)?;
        t.render(messages, None, add_generation_prompt)
            .map_err(|e| EngineError::Template(e.to_string()))
    }

    /// Text to token ids: special-token text is parsed, and the model's
    /// BOS/EOS rule applies, as llama.cpp does.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let t = crate::trace::rec::start();
        let ids = self.tokenizer.encode(text, true, true);
        crate::trace::rec::end(t, "engine", "tokenize", ids.len() as u64);
        ids
    }

    /// A one-turn prompt: `user` (with an optional `system` message) as
    /// token ids, checked against the context window `n_ctx`.
    ///
    /// # Errors
    /// [`EngineError::EmptyPrompt`]; [`EngineError::PromptTooLong`] when
    /// the prompt leaves no room to generate in `n_ctx`;
    /// [`EngineError::NoTemplate`] for a system message without a
    /// template (or in raw mode); [`EngineError::Template`].
    pub fn prompt(
        &self,
        system: Option<&str>,
        user: &str,
        mode: PromptMode,
        n_ctx: u32,
    ) -> Result<Vec<u32>> {
        let text = match (mode, &self.template) {
            (PromptMode::Chat, Some(_)) => {
                let mut messages = Vec::new();
                if let Some(s) = system {
                    messages.push(ChatMessage::new("system", s));
                }
                messages.push(ChatMessage::new("user", user));
                self.render_chat(&messages, true)?
            }
            _ if system.is_some() => return Err(EngineError::NoTemplate),
            _ => user.to_string(),
        };
        let ids = self.tokenize(&text);
        check_fits(&ids, n_ctx)?;
        Ok(ids)
    }

    /// An empty runtime for this model.
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub fn runtime(&self, cfg: EngineConfig) -> Result<Runtime> {
        Runtime::new(self.model.clone(), cfg)
    }

    /// A scheduler on an empty runtime for this model.
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub fn scheduler(&self, cfg: EngineConfig) -> Result<Scheduler> {
        Ok(Scheduler::new(self.runtime(cfg)?, self.tokenizer.clone())
            .with_vocab(self.vocab.clone()))
    }

    /// A single-sequence engine for this model.
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub fn engine(&self, cfg: EngineConfig) -> Result<Engine> {
        Engine::new(self.model.clone(), cfg)
    }
}

/// Only the tokenizer of the model `spec` names (no weights are read), for
/// tools that turn text into ids.
///
/// # Errors
/// [`EngineError::Store`]; [`EngineError::Load`] naming the file.
pub fn load_tokenizer(store: &Store, spec: &str) -> Result<Tokenizer> {
    let path = store.resolve(spec)?;
    let fail = |what: String| EngineError::Load {
        path: path.clone(),
        what,
    };
    let file = GgufFile::open(&path).map_err(|e| fail(e.to_string()))?;
    Tokenizer::from_gguf(file.metadata()).map_err(|e| fail(format!("tokenizer: {e}")))
}

/// Checks that a prompt is not empty and leaves room for at least one
/// generated token in `n_ctx`.
///
/// # Errors
/// [`EngineError::EmptyPrompt`]; [`EngineError::PromptTooLong`].
pub fn check_fits(ids: &[u32], n_ctx: u32) -> Result<()> {
    if ids.is_empty() {
        return Err(EngineError::EmptyPrompt);
    }
    if ids.len() >= n_ctx as usize {
        return Err(EngineError::PromptTooLong {
            tokens: ids.len(),
            n_ctx,
        });
    }
    Ok(())
}

/// Logs what a model load found: the file, its architecture, the mix of
/// tensor types (by bytes), the bytes mapped and the time taken.
fn log_load(path: &Path, file: &GgufFile, took: std::time::Duration) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let mut mix: Vec<(String, u64, usize)> = Vec::new();
    for t in file.tensors() {
        let ty = t.info.ggml_type.to_string();
        match mix.iter_mut().find(|(n, _, _)| *n == ty) {
            Some((_, b, c)) => {
                *b += t.info.n_bytes;
                *c += 1;
            }
            None => mix.push((ty, t.info.n_bytes, 1)),
        }
    }
    mix.sort_by_key(|m| std::cmp::Reverse(m.1));
    let mix: Vec<String> = mix
        .iter()
        .map(|(n, b, c)| format!("{n}: {c} tensors, {:.1} MiB", *b as f64 / 1048576.0))
        .collect();
    tracing::info!(
        file = %path.display(),
        arch = file.architecture().unwrap_or("?"),
        bytes_mapped = file.file_size(),
        load_ms = took.as_secs_f64() * 1e3,
        "model loaded; quant mix: {}",
        mix.join(", ")
    );
}

//! The speculative-decoding options shared by `run`, `chat`, `serve` and
//! `bench`.

use anyhow::{Context, Result};
use minfer_engine::spec::{DEFAULT_DRAFT_MAX, DEFAULT_LOOKUP_NGRAM};
use minfer_engine::{
    DraftModel, EngineConfig, LoadedModel, SpecConfig, SpecStats, Speculation, Store,
};

/// Speculative decoding: guessed tokens checked by the model in one step.
/// The answers are exactly those without it.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SpecArgs {
    /// Draft model for speculative decoding (a file, known name or hf:…):
    /// a small model with the same vocabulary that guesses the next tokens,
    /// e.g. qwen2.5-coder-0.5b-instruct for qwen2.5-coder-1.5b-instruct.
    #[arg(long = "draft", visible_aliases = ["model-draft", "spec-draft-model"], value_name = "MODEL")]
    pub draft: Option<String>,
    /// Prompt lookup: guess the next tokens from earlier occurrences of the
    /// last N tokens in the prompt and the answer (no second model; pays
    /// where the answer repeats its context, as in code edits). `serve`
    /// has it on (N = 3), each generation's guesses checked only while
    /// they pay; 0 turns it off.
    #[arg(long = "lookup", value_name = "N", num_args = 0..=1,
          default_missing_value = DEFAULT_LOOKUP_NGRAM_STR)]
    pub lookup: Option<usize>,
    /// Most guessed tokens checked per step.
    #[arg(long = "draft-max", visible_aliases = ["draft-n", "spec-draft-n-max"], default_value_t = DEFAULT_DRAFT_MAX)]
    pub draft_max: usize,
    /// Fewest guessed tokens worth a check.
    #[arg(long = "draft-min", visible_aliases = ["draft-n-min", "spec-draft-n-min"], default_value_t = 0)]
    pub draft_min: usize,
    /// The draft model stops guessing at a token it gives less than this
    /// probability.
    #[arg(
        long = "draft-p-min",
        visible_alias = "spec-draft-p-min",
        default_value_t = 0.0
    )]
    pub p_min: f32,
    /// Always check as many guesses as there are (up to --draft-max),
    /// instead of letting measured step costs and acceptance choose and
    /// switch speculation off where it does not pay.
    #[arg(long = "spec-fixed")]
    pub fixed: bool,
}

/// `DEFAULT_LOOKUP_NGRAM` as clap wants a default: a string.
const DEFAULT_LOOKUP_NGRAM_STR: &str = match DEFAULT_LOOKUP_NGRAM {
    3 => "3",
    _ => panic!("update DEFAULT_LOOKUP_NGRAM_STR"),
};

impl SpecArgs {
    /// Whether any speculation was asked for.
    pub fn enabled(&self) -> bool {
        self.draft.is_some() || self.lookup.is_some_and(|n| n > 0)
    }

    /// These options with prompt lookup of `ngram` where `--lookup` was
    /// not given (`--lookup 0` stays off).
    pub fn with_default_lookup(&self, ngram: usize) -> SpecArgs {
        SpecArgs {
            lookup: Some(self.lookup.unwrap_or(ngram)),
            ..self.clone()
        }
    }

    /// The engine's settings for these options (checked).
    pub fn config(&self) -> Result<SpecConfig> {
        let cfg = SpecConfig {
            draft_max: self.draft_max,
            draft_min: self.draft_min,
            p_min: self.p_min,
            lookup_max: self.lookup.unwrap_or(0),
            adaptive: !self.fixed,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the options before any model is loaded.
    pub fn check(&self) -> Result<()> {
        if self.enabled() {
            self.config()?;
        }
        Ok(())
    }

    /// The speculation these options describe for `target`, loading the
    /// draft model (on a runtime with the target's settings); `None` when
    /// none was asked for.
    pub fn speculation(
        &self,
        store: &Store,
        target: &LoadedModel,
        engine: EngineConfig,
    ) -> Result<Option<Speculation>> {
        if !self.enabled() {
            return Ok(None);
        }
        let cfg = self.config()?;
        let draft = match &self.draft {
            None => None,
            Some(spec) => {
                let loaded = crate::runtime::load(store, spec)?;
                let rt = loaded.runtime(engine)?;
                let d = DraftModel::new(
                    rt,
                    loaded.tokenizer(),
                    target.tokenizer(),
                    target.model().n_vocab(),
                )
                .with_context(|| format!("--draft {spec}"))?;
                Some(d)
            }
        };
        Ok(Some(Speculation::new(cfg, draft)?))
    }
}

/// `drafted D, accepted A (P%), C checks`: the counters of speculation.
pub fn format_counts(s: &SpecStats) -> String {
    format!(
        "drafted {}, accepted {} ({:.1}%), {} checks",
        s.drafted,
        s.accepted,
        100.0 * s.acceptance(),
        s.checks
    )
}

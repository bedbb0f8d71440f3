//! Constrained output through llguidance: a grammar (GBNF or Lark) or a
//! JSON schema becomes a token mask, computed before each draw and applied
//! ahead of every other stage.
//!
//! JSON schemas, alone or as `%json` in a Lark grammar, are relaxed first
//! (see [`relax`]): what the grammar cannot enforce is dropped rather than
//! refused, and the caller learns what through [`Grammar::compile`]'s notes.

mod gbnf;
mod lazy;
mod relax;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, SimpleVob, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};

pub use gbnf::Gbnf;

use crate::tokens::Tokens;
use crate::{Constraint, SamplerError, Trigger};
use lazy::Wait;
use relax::{clip, Depth, Notes};

/// The longest error message taken from llguidance, in bytes: its
/// messages quote the grammar around the error, and a tool-call grammar
/// is one line holding every tool's schema (tens of kilobytes), so the
/// quote is cut out and what is left is bounded.
const MAX_ERROR: usize = 480;

/// llguidance's message `msg` without the grammar text it quotes (the
/// numbered source lines and the caret line under them), on one line and
/// at most [`MAX_ERROR`] bytes.
pub(crate) fn brief(msg: &str) -> String {
    let quoted = |l: &str| {
        let digits = l.bytes().take_while(u8::is_ascii_digit).count();
        (digits > 0 && l[digits..].starts_with(" |")) || l.bytes().all(|b| b == b'^')
    };
    let kept: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !quoted(l))
        .collect();
    clip(&kept.join(" "), MAX_ERROR)
}

fn engine_error(e: impl std::fmt::Display) -> SamplerError {
    SamplerError::Grammar(brief(&e.to_string()))
}

/// The per-model part of constrained output: the token trie over the
/// vocabulary and llguidance's parser factory.
pub(crate) struct GrammarEnv {
    factory: ParserFactory,
    /// The token trie, for a lazy constraint's view of the output bytes.
    tok_env: TokEnv,
    n_vocab: usize,
    eog: Vec<u32>,
}

impl GrammarEnv {
    pub(crate) fn build(vocab: &Tokens) -> Result<GrammarEnv, SamplerError> {
        let n = vocab.len();
        let n32 = u32::try_from(n)
            .map_err(|_| SamplerError::GrammarVocab(format!("{n} tokens is too many")))?;
        let Some(&eos) = vocab.eog().first() else {
            return Err(SamplerError::GrammarVocab(
                "the model has no end-of-generation token".into(),
            ));
        };
        // Special tokens carry llguidance's 0xFF marker so no grammar over
        // text can produce them by accident.
        let words: Vec<Vec<u8>> = (0..n32)
            .map(|id| {
                let piece = vocab.piece(id);
                if vocab.is_special(id) {
                    let mut w = Vec::with_capacity(piece.len() + 1);
                    w.push(0xFF);
                    if piece.is_empty() {
                        w.extend_from_slice(format!("[{id}]").as_bytes());
                    } else {
                        w.extend_from_slice(piece);
                    }
                    w
                } else {
                    piece.to_vec()
                }
            })
            .collect();
        let eog = vocab.eog().to_vec();
        // toktrie asserts on inputs it cannot represent; those must become
        // an error for this request, not a crash of the process.
        let built = catch_unwind(AssertUnwindSafe(|| {
            let info = TokRxInfo::new(n32, eos);
            let trie = TokTrie::from(&info, &words).with_eos_tokens(&eog);
            let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
            ParserFactory::new_simple(&env).map(|f| (f, env))
        }));
        let (mut factory, tok_env) = match built {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return Err(SamplerError::GrammarVocab(e.to_string())),
            Err(_) => {
                return Err(SamplerError::GrammarVocab(
                    "llguidance could not build a token trie from it".into(),
                ))
            }
        };
        factory.quiet();
        Ok(GrammarEnv {
            factory,
            tok_env,
            n_vocab: n,
            eog,
        })
    }
}

/// One generation's constraint state: the matcher and the mask for the
/// next token, once computed. A lazy constraint first waits for its
/// trigger: until then the output is free and the matcher sees nothing.
pub(crate) struct Grammar {
    env: Arc<GrammarEnv>,
    matcher: Matcher,
    mask: Option<SimpleVob>,
    wait: Option<Wait>,
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammar")
            .field("mask_ready", &self.mask.is_some())
            .finish_non_exhaustive()
    }
}

impl Clone for Grammar {
    fn clone(&self) -> Self {
        Grammar {
            env: Arc::clone(&self.env),
            matcher: self.matcher.deep_clone(),
            mask: self.mask.clone(),
            wait: self.wait.clone(),
        }
    }
}

/// What the mask allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allowed {
    /// Some text can still follow.
    Text,
    /// Only an end-of-generation token: the output is complete.
    EndOnly,
}

/// The JSON layout forced on schema output: one line, a space after `,`
/// and `:`. Free whitespace lets a small model emit newlines forever.
fn json_options() -> Value {
    json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "})
}

/// A constraint as llguidance will compile it, relaxed to one depth.
#[derive(Clone, PartialEq)]
enum Source {
    Lark(String),
    Json(Value),
}

impl Source {
    fn of(c: &Constraint, depth: Depth, notes: &mut Notes) -> Result<Source, SamplerError> {
        Ok(match c {
            Constraint::Gbnf(text) => Source::Lark(Gbnf::parse(text)?.to_lark()),
            Constraint::Lark(text) => Source::Lark(relax::relax_lark(text, depth, notes)),
            Constraint::JsonSchema(text) => {
                let mut schema: Value = serde_json::from_str(text).map_err(|e| {
                    SamplerError::Grammar(format!("JSON schema is not valid JSON: {e}"))
                })?;
                if !schema.is_object() && !schema.is_boolean() {
                    return Err(SamplerError::Grammar(
                        "a JSON schema must be an object (or true/false)".into(),
                    ));
                }
                if let Value::Object(map) = &mut schema {
                    map.entry("x-guidance").or_insert_with(json_options);
                }
                relax::relax_schema(&mut schema, depth, notes);
                Source::Json(schema)
            }
            Constraint::JsonObject => {
                Source::Json(json!({"type": "object", "x-guidance": json_options()}))
            }
        })
    }

    fn grammar(self) -> TopLevelGrammar {
        match self {
            Source::Lark(text) => TopLevelGrammar::from_lark(text),
            Source::Json(schema) => TopLevelGrammar::from_json_schema(schema),
        }
    }
}

/// Builds the matcher for `source`; the error is llguidance's, shortened
/// by [`brief`].
fn start(env: &GrammarEnv, source: Source) -> Result<Matcher, String> {
    let top = source.grammar();
    let parser = catch_unwind(AssertUnwindSafe(|| env.factory.create_parser(top)))
        .map_err(|_| "llguidance failed on this grammar".to_string())?
        .map_err(|e| brief(&e.to_string()))?;
    let matcher = Matcher::new(Ok(parser));
    if let Some(e) = matcher.get_error() {
        return Err(brief(&e));
    }
    Ok(matcher)
}

impl Grammar {
    /// Compiles `c` over the grammar environment `env` gives (asked for
    /// once the constraint itself has been read), with its JSON schemas relaxed to what the
    /// grammar can enforce; also returns what was relaxed, one short line
    /// each (empty when nothing was).
    ///
    /// A schema that still fails (other than by being unsatisfiable) is
    /// tried once more reduced to its structure; when that fails too, the
    /// error is the first try's.
    pub(crate) fn compile(
        c: &Constraint,
        env: impl FnOnce() -> Result<Arc<GrammarEnv>, SamplerError>,
    ) -> Result<(Grammar, Vec<String>), SamplerError> {
        let mut notes = Notes::default();
        let first = Source::of(c, Depth::Needed, &mut notes)?;
        let env = env()?;
        let relaxable = matches!(c, Constraint::Lark(_) | Constraint::JsonSchema(_));
        let retry = relaxable.then(|| first.clone());
        let err = match start(&env, first) {
            Ok(matcher) => return Ok(Grammar::new(env, matcher, notes)),
            Err(e) => e,
        };
        // An unsatisfiable schema is the schema's own contradiction, not a
        // keyword the grammar cannot enforce: no relaxation makes the output
        // valid for it, so it stays an error.
        let retry = retry.filter(|_| !err.contains("Unsatisfiable schema"));
        if let Some(first) = retry {
            let mut notes = Notes::default();
            notes.push(format!("reduced the schema to its structure after: {err}"));
            let second = Source::of(c, Depth::Structure, &mut notes)?;
            if second != first {
                if let Ok(matcher) = start(&env, second) {
                    return Ok(Grammar::new(env, matcher, notes));
                }
            }
        }
        Err(SamplerError::Grammar(err))
    }

    fn new(env: Arc<GrammarEnv>, mut matcher: Matcher, mut notes: Notes) -> (Grammar, Vec<String>) {
        // llguidance's lenient mode reports what it let through as warnings.
        for w in matcher.grammar_warnings() {
            notes.push(w);
        }
        let g = Grammar {
            env,
            matcher,
            mask: None,
            wait: None,
        };
        (g, notes.into_lines())
    }

    /// The same constraint, asleep until `trigger` shows in the output.
    pub(crate) fn lazy(mut self, trigger: &Trigger) -> Grammar {
        self.wait = Some(Wait::new(trigger));
        self
    }

    /// Computes the mask for the next token, if not done yet. This is the
    /// expensive part; the scheduler calls it while the forward pass runs.
    pub(crate) fn prepare(&mut self) -> Result<(), SamplerError> {
        if self.mask.is_none() && self.wait.is_none() {
            // A stopped parser (the grammar is complete) allows only the
            // end-of-generation tokens.
            let m = self.matcher.compute_mask_or_eos().map_err(engine_error)?;
            self.mask = Some(m);
        }
        Ok(())
    }

    /// Sets every logit the grammar forbids to `-inf` (entries past the
    /// vocabulary too) and says what is left.
    pub(crate) fn apply(&mut self, logits: &mut [f32]) -> Result<Allowed, SamplerError> {
        if self.wait.is_some() {
            return Ok(Allowed::Text);
        }
        self.prepare()?;
        let Some(mask) = &self.mask else {
            return Err(SamplerError::GrammarDeadEnd);
        };
        let words = mask.as_slice();
        let n = logits.len().min(self.env.n_vocab);
        for (w, chunk) in logits[..n].chunks_mut(32).enumerate() {
            let bits = words.get(w).copied().unwrap_or(0);
            if bits == u32::MAX {
                continue;
            }
            for (b, l) in chunk.iter_mut().enumerate() {
                if bits & (1 << b) == 0 {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        logits[n..].fill(f32::NEG_INFINITY);
        let allowed = mask.num_set();
        if allowed == 0 {
            return Err(SamplerError::GrammarDeadEnd);
        }
        let eog_allowed = self.env.eog.iter().filter(|&&t| mask.is_allowed(t)).count();
        Ok(if eog_allowed == allowed {
            Allowed::EndOnly
        } else {
            Allowed::Text
        })
    }

    /// Advances the grammar past `token`.
    pub(crate) fn accept(&mut self, token: u32) -> Result<(), SamplerError> {
        self.mask = None;
        if let Some(wait) = &mut self.wait {
            let trie = self.env.tok_env.tok_trie();
            let Some(replay) = wait.push(token, trie) else {
                return Ok(());
            };
            self.wait = None;
            // The output from the trigger (or from just after it) on is
            // the constraint's beginning.
            return self
                .matcher
                .consume_tokens(&replay)
                .map_err(|e| engine_error(format!("after the trigger: {e}")));
        }
        if self.matcher.is_stopped() {
            // Complete: the token is an end-of-generation one the mask
            // allowed, and there is nothing left to advance.
            return Ok(());
        }
        self.matcher.consume_token(token).map_err(engine_error)
    }
}

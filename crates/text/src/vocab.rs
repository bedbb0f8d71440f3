//! The vocabulary as llama.cpp loads it from GGUF metadata: token texts and
//! attributes, special ids, the `add_bos`/`add_eos` rule and the set of
//! end-of-generation tokens.

use std::collections::BTreeSet;

use minfer_gguf::Metadata;

use crate::fxhash::FxHashMap;
use crate::pretok::PreTokenizer;
use crate::TextError;

/// Token attribute bits, as llama.cpp keeps them per token.
pub(crate) mod attr {
    pub const UNKNOWN: u8 = 1 << 0;
    pub const UNUSED: u8 = 1 << 1;
    pub const NORMAL: u8 = 1 << 2;
    pub const CONTROL: u8 = 1 << 3;
    pub const USER_DEFINED: u8 = 1 << 4;
    pub const BYTE: u8 = 1 << 5;
    /// Whitespace before the token is dropped when it is cut out of a
    /// prompt.
    pub const LSTRIP: u8 = 1 << 6;
    /// Whitespace after the token is dropped when it is cut out of a
    /// prompt.
    pub const RSTRIP: u8 = 1 << 7;
}

/// Special token ids; `None` when the model has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn.
    pub eot: Option<u32>,
    /// End of message (tool call pending).
    pub eom: Option<u32>,
    /// Unknown token.
    pub unk: Option<u32>,
    /// Separator.
    pub sep: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
    /// Mask.
    pub mask: Option<u32>,
    /// Fill-in-the-middle: prefix.
    pub fim_pre: Option<u32>,
    /// Fill-in-the-middle: suffix.
    pub fim_suf: Option<u32>,
    /// Fill-in-the-middle: middle.
    pub fim_mid: Option<u32>,
    /// Fill-in-the-middle: padding.
    pub fim_pad: Option<u32>,
    /// Fill-in-the-middle: repository name.
    pub fim_rep: Option<u32>,
    /// Fill-in-the-middle: file separator.
    pub fim_sep: Option<u32>,
}

/// The tokenizer family of a vocabulary (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VocabKind {
    /// `gpt2`: byte-level BPE with merge rules.
    Bpe,
    /// `llama`: SentencePiece with scores and byte-fallback tokens.
    Spm,
}

#[derive(Clone, Debug)]
pub(crate) struct Vocab {
    pub kind: VocabKind,
    pub texts: Vec<String>,
    /// Per token, its SentencePiece score (empty for BPE).
    pub scores: Vec<f32>,
    /// SentencePiece: a space is put in front of the text and after each
    /// special token (`tokenizer.ggml.add_space_prefix`, default on).
    pub add_space_prefix: bool,
    pub attrs: Vec<u8>,
    /// Text → id; for duplicate texts the last id wins, as in llama.cpp.
    pub token_ids: FxHashMap<String, u32>,
    pub special: SpecialIds,
    pub add_bos: bool,
    pub add_eos: bool,
    /// Sorted.
    pub eog: Vec<u32>,
    pub pre: PreTokenizer,
    pub warnings: Vec<String>,
}

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_TYPES: &str = "tokenizer.ggml.token_type";
const KEY_SCORES: &str = "tokenizer.ggml.scores";

/// Texts that llama.cpp treats as end-of-generation whatever their id.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Texts that identify the end-of-turn token when the metadata names none,
/// in the order this crate prefers them (llama.cpp takes whichever its hash
/// map yields first, which is not reproducible).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// Selects one field of [`SpecialIds`].
type Slot = fn(&mut SpecialIds) -> &mut Option<u32>;

/// Tokens llama.cpp always renders as text (gpt-oss's structural markers).
const FORCED_USER_DEFINED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// The pre-tokenizer `tokenizer.ggml.pre` names (BPE only: SentencePiece
/// splits nothing before merging); an unknown or missing name falls back
/// to `default` with a warning.
fn pre_tokenizer(
    md: &Metadata,
    kind: VocabKind,
    warnings: &mut Vec<String>,
) -> Result<PreTokenizer, TextError> {
    let pre = match md.get_str(KEY_PRE)? {
        // SentencePiece splits nothing before merging.
        _ if kind == VocabKind::Spm => PreTokenizer::fallback(),
        None => {
            warnings.push(format!(
                "`{KEY_PRE}` is missing; using the `default` pre-tokenizer \
                 (tokenization may differ from the model's own)"
            ));
            PreTokenizer::fallback()
        }
        Some(name) => PreTokenizer::by_name(name).unwrap_or_else(|| {
            warnings.push(format!(
                "unknown pre-tokenizer `{name}`; using the `default` pre-tokenizer \
                 (tokenization may differ from the model's own)"
            ));
            PreTokenizer::fallback()
        }),
    };
    Ok(pre)
}

/// The SentencePiece scores, one per token.
fn read_scores(md: &Metadata, n: usize) -> Result<Vec<f32>, TextError> {
    let Some(arr) = md.get_array(KEY_SCORES)? else {
        return Ok(vec![0.0; n]);
    };
    if arr.items.len() < n {
        return Err(TextError::BadMetadata {
            key: KEY_SCORES,
            reason: format!("{} scores for {n} tokens", arr.items.len()),
        });
    }
    arr.items[..n]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_f64()
                .map(|s| s as f32)
                .ok_or_else(|| TextError::BadMetadata {
                    key: KEY_SCORES,
                    reason: format!("element {i} is {}, not a number", v.type_name()),
                })
        })
        .collect()
}

impl Vocab {
    pub fn from_gguf(md: &Metadata) -> Result<Vocab, TextError> {
        let model = md
            .get_str(KEY_MODEL)?
            .ok_or(TextError::MissingKey(KEY_MODEL))?;
        let kind = match model {
            "gpt2" => VocabKind::Bpe,
            "llama" => VocabKind::Spm,
            other => return Err(TextError::UnsupportedModel(other.to_string())),
        };
        let mut warnings = Vec::new();

        let pre = pre_tokenizer(md, kind, &mut warnings)?;

        let tokens = md
            .get_array(KEY_TOKENS)?
            .ok_or(TextError::MissingKey(KEY_TOKENS))?;
        let n = tokens.items.len();
        if n == 0 || u32::try_from(n).is_err() {
            return Err(TextError::BadMetadata {
                key: KEY_TOKENS,
                reason: format!("{n} tokens"),
            });
        }
        let mut texts = Vec::with_capacity(n);
        for (i, v) in tokens.items.iter().enumerate() {
            let s = v.as_str().ok_or_else(|| TextError::BadMetadata {
                key: KEY_TOKENS,
                reason: format!("element {i} is {}, not a string", v.type_name()),
            })?;
            // llama.cpp gives empty entries a placeholder so that every
            // token has a distinct, non-empty text.
            texts.push(if s.is_empty() {
                warnings.push(format!("empty token at index {i}"));
                format!("[EMPTY_{i}]")
            } else {
                s.to_string()
            });
        }

        let mut attrs = vec![attr::NORMAL; n];
        if let Some(types) = md.get_array(KEY_TYPES)? {
            if types.items.len() < n {
                return Err(TextError::BadMetadata {
                    key: KEY_TYPES,
                    reason: format!("{} entries for {n} tokens", types.items.len()),
                });
            }
            for (a, v) in attrs.iter_mut().zip(&types.items) {
                *a = match v.as_i64() {
                    Some(1) => attr::NORMAL,
                    Some(2) => attr::UNKNOWN,
                    Some(3) => attr::CONTROL,
                    Some(4) => attr::USER_DEFINED,
                    Some(5) => attr::UNUSED,
                    Some(6) => attr::BYTE,
                    _ => 0,
                };
            }
        }

        let token_ids: FxHashMap<String, u32> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();

        let scores = match kind {
            VocabKind::Bpe => Vec::new(),
            VocabKind::Spm => read_scores(md, n)?,
        };
        let mut v = Vocab {
            kind,
            texts,
            scores,
            add_space_prefix: md
                .get_bool("tokenizer.ggml.add_space_prefix")?
                .unwrap_or(true),
            attrs,
            token_ids,
            special: SpecialIds::default(),
            add_bos: kind == VocabKind::Spm || pre.add_bos_default,
            add_eos: false,
            eog: Vec::new(),
            pre,
            warnings,
        };
        v.read_special_ids(md)?;
        if let Some(b) = md.get_bool("tokenizer.ggml.add_bos_token")? {
            v.add_bos = b;
        }
        if let Some(b) = md.get_bool("tokenizer.ggml.add_eos_token")? {
            v.add_eos = b;
        }
        if v.add_bos && v.special.bos.is_none() {
            v.warnings
                .push("the model adds BOS but has no BOS token; none will be added".into());
        }
        if v.add_eos && v.special.eos.is_none() {
            v.warnings
                .push("the model adds EOS but has no EOS token; none will be added".into());
        }
        v.detect_by_text();
        v.build_eog();
        v.strip_by_name(md)?;
        Ok(v)
    }

    /// llama.cpp's per-model strip attributes, which GGUF files do not
    /// carry: chosen by `tokenizer.ggml.pre`, `general.architecture` and
    /// the lower-cased `general.name`, first matching rule only.
    ///
    /// - Jina v2 (de/es/code) and Nomic-BERT-MoE / Jina-BERT v3: `<mask>`
    ///   strips the whitespace before it.
    /// - Phi-3 (a name containing `phi-3` or `phi3`): every special token
    ///   (control, user-defined, unknown) and `</s>` strip the whitespace
    ///   after them, except `<unk>`, `<s>` and `<|endoftext|>`.
    /// - ModernBERT: `[MASK]` strips the whitespace before it.
    ///
    /// llama.cpp refuses to load a file that matches a rule but lacks one
    /// of the tokens it names; here the missing token is skipped with a
    /// warning.
    fn strip_by_name(&mut self, md: &Metadata) -> Result<(), TextError> {
        let pre = md.get_str(KEY_PRE)?.unwrap_or("");
        let arch = md.get_str("general.architecture")?.unwrap_or("");
        let name = md
            .get_str("general.name")?
            .unwrap_or("")
            .to_ascii_lowercase();
        let any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        if any(pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
            || any(arch, &["nomic-bert-moe", "jina-bert-v3"])
        {
            self.set_strip("<mask>", attr::LSTRIP, true);
        } else if any(&name, &["phi-3", "phi3"]) {
            for a in self.attrs.iter_mut().filter(|a| **a & special != 0) {
                *a |= attr::RSTRIP;
            }
            self.set_strip("</s>", attr::RSTRIP, true);
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                self.set_strip(text, attr::RSTRIP, false);
            }
        } else if name.contains("modern-bert") {
            self.set_strip("[MASK]", attr::LSTRIP, true);
        }
        Ok(())
    }

    fn set_strip(&mut self, text: &str, bit: u8, on: bool) {
        let Some(&id) = self.token_ids.get(text) else {
            self.warnings.push(format!(
                "token `{text}` is missing; llama.cpp would refuse this vocabulary"
            ));
            return;
        };
        let a = &mut self.attrs[id as usize];
        *a = if on { *a | bit } else { *a & !bit };
    }

    fn read_special_ids(&mut self, md: &Metadata) -> Result<(), TextError> {
        let n = self.texts.len() as u64;
        let id = |i: u64| (i < n).then_some(i as u32);
        // llama.cpp's defaults: BOS 1, EOS 2, UNK 0 for SentencePiece,
        // 11 for both ends for byte-level BPE.
        match self.kind {
            VocabKind::Spm => {
                self.special.bos = id(1);
                self.special.eos = id(2);
                self.special.unk = id(0);
            }
            VocabKind::Bpe => {
                self.special.bos = id(11);
                self.special.eos = self.special.bos;
            }
        }
        let keys: [(&str, Slot); 17] = [
            ("bos_token_id", |s| &mut s.bos),
            ("eos_token_id", |s| &mut s.eos),
            ("eot_token_id", |s| &mut s.eot),
            ("eom_token_id", |s| &mut s.eom),
            ("unknown_token_id", |s| &mut s.unk),
            ("seperator_token_id", |s| &mut s.sep),
            ("padding_token_id", |s| &mut s.pad),
            ("mask_token_id", |s| &mut s.mask),
            ("fim_pre_token_id", |s| &mut s.fim_pre),
            ("fim_suf_token_id", |s| &mut s.fim_suf),
            ("fim_mid_token_id", |s| &mut s.fim_mid),
            ("fim_pad_token_id", |s| &mut s.fim_pad),
            ("fim_rep_token_id", |s| &mut s.fim_rep),
            ("fim_sep_token_id", |s| &mut s.fim_sep),
            // Older names of the first three FIM keys.
            ("prefix_token_id", |s| &mut s.fim_pre),
            ("suffix_token_id", |s| &mut s.fim_suf),
            ("middle_token_id", |s| &mut s.fim_mid),
        ];
        for (name, slot) in keys {
            let key = format!("tokenizer.ggml.{name}");
            let Some(id) = md.get_u64(&key)? else {
                continue;
            };
            if id >= n {
                self.warnings.push(format!(
                    "bad special token `{key}` = {id} (vocabulary has {n} tokens); ignored"
                ));
                continue;
            }
            *slot(&mut self.special) = Some(id as u32);
        }
        Ok(())
    }

    fn mark_control(&mut self, id: u32) {
        let a = &mut self.attrs[id as usize];
        if *a & attr::CONTROL == 0 {
            self.warnings.push(format!(
                "control-looking token {id} `{}` was not control-type; treating it as control",
                self.texts[id as usize]
            ));
            *a |= attr::CONTROL;
        }
    }

    /// Finds EOT/EOM/FIM tokens by text when the metadata does not name them.
    fn detect_by_text(&mut self) {
        let lists: [(&[&str], Slot); 8] = [
            (EOT_TEXTS, |s| &mut s.eot),
            (EOM_TEXTS, |s| &mut s.eom),
            (FIM_PRE_TEXTS, |s| &mut s.fim_pre),
            (FIM_SUF_TEXTS, |s| &mut s.fim_suf),
            (FIM_MID_TEXTS, |s| &mut s.fim_mid),
            (FIM_PAD_TEXTS, |s| &mut s.fim_pad),
            (FIM_REP_TEXTS, |s| &mut s.fim_rep),
            (FIM_SEP_TEXTS, |s| &mut s.fim_sep),
        ];
        for (texts, slot) in lists {
            if slot(&mut self.special).is_some() {
                continue;
            }
            if let Some(id) = texts.iter().find_map(|t| self.token_ids.get(*t).copied()) {
                *slot(&mut self.special) = Some(id);
                self.mark_control(id);
            }
        }
    }

    fn build_eog(&mut self) {
        let s = self.special;
        let mut eog: BTreeSet<u32> = [s.fim_pad, s.fim_rep, s.fim_sep]
            .into_iter()
            .flatten()
            .collect();
        for text in EOG_TEXTS {
            if let Some(&id) = self.token_ids.get(*text) {
                eog.insert(id);
                self.mark_control(id);
            }
        }
        for text in FORCED_USER_DEFINED {
            if let Some(&id) = self.token_ids.get(*text) {
                self.attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        eog.extend([s.eos, s.eot, s.eom].into_iter().flatten());

        // Harmony-style vocabularies end a message with `<|end|>` without
        // ending generation: llama.cpp drops it when the tokens that do end
        // it exist.
        let ids = &self.token_ids;
        let has = |eog: &BTreeSet<u32>, t: &str| ids.get(t).is_some_and(|id| eog.contains(id));
        if let Some(&end) = ids.get("<|end|>").filter(|id| eog.contains(id)) {
            let call = has(&eog, "<|call|>") || has(&eog, "<|calls|>");
            if call && (has(&eog, "<|return|>") || has(&eog, "<|flush|>")) {
                eog.remove(&end);
                self.attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // Likewise `</s>` is an ordinary token in vocabularies that end
        // turns with their own markers.
        if let Some(&s_tok) = ids.get("</s>").filter(|id| eog.contains(id)) {
            if has(&eog, "<|tool_response>") || has(&eog, "<|plamo:eos|>") {
                eog.remove(&s_tok);
                self.attrs[s_tok as usize] = attr::NORMAL;
            }
        }
        self.eog = eog.into_iter().collect();
    }
}

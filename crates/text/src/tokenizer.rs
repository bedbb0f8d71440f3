//! The public tokenizer: text ↔ token ids for byte-level BPE and
//! SentencePiece vocabularies.

use minfer_gguf::Metadata;

use crate::bpe::Merges;
use crate::bytes;
use crate::partition::{Fragment, SpecialTokens};
use crate::spm::{self, Spm};
use crate::vocab::{attr, SpecialIds, Vocab, VocabKind};
use crate::TextError;

const KEY_MERGES: &str = "tokenizer.ggml.merges";

/// How text fragments become tokens.
#[derive(Clone, Debug)]
enum Model {
    /// Byte-level BPE: pre-tokenizer splits, then merge rules.
    Bpe(Box<Merges>),
    /// SentencePiece: score-ordered merges with byte fallback.
    Spm(Spm),
}

/// A tokenizer (byte-level BPE or SentencePiece) that reproduces
/// llama.cpp's `llama_tokenize` and `llama_token_to_piece` for the same
/// GGUF file.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    specials: SpecialTokens,
    /// Per token, its bytes as rendered with `special = true`.
    pieces: Vec<Box<[u8]>>,
}

impl Tokenizer {
    /// Builds the tokenizer from a model's metadata.
    ///
    /// `tokenizer.ggml.model` `gpt2` (byte-level BPE) and `llama`
    /// (SentencePiece) are supported; any other model is
    /// [`TextError::UnsupportedModel`] naming it. For BPE, an unknown or
    /// missing `tokenizer.ggml.pre` is not an error: llama.cpp's `default`
    /// pre-tokenizer is used and a warning is recorded in
    /// [`warnings`](Self::warnings).
    pub fn from_gguf(md: &Metadata) -> Result<Tokenizer, TextError> {
        let v = Vocab::from_gguf(md)?;
        let model = match v.kind {
            VocabKind::Bpe => Model::Bpe(Box::new(read_merges(md, &v)?)),
            VocabKind::Spm => Model::Spm(Spm::new(
                &v.texts,
                &v.token_ids,
                v.scores.clone(),
                v.special.unk,
            )),
        };
        let specials = SpecialTokens::new(&v.texts, &v.attrs);
        let pieces = v
            .texts
            .iter()
            .zip(&v.attrs)
            .map(|(t, &a)| render_piece(v.kind, t, a).into_boxed_slice())
            .collect();
        Ok(Tokenizer {
            vocab: v,
            model,
            specials,
            pieces,
        })
    }

    /// Non-fatal problems found while loading (unknown pre-tokenizer,
    /// out-of-range special ids, mistyped control tokens…), one sentence
    /// each. The caller decides whether and how to show them.
    pub fn warnings(&self) -> &[String] {
        &self.vocab.warnings
    }

    /// The name of the pre-tokenizer in use (`default` for the fallback).
    pub fn pre_tokenizer(&self) -> &str {
        &self.vocab.pre.name
    }

    /// Tokenizes `text` as `llama_tokenize` does.
    ///
    /// With `parse_special`, control, user-defined and unknown token texts
    /// in `text` (e.g. `<|im_start|>`) become their ids; without it only
    /// user-defined tokens do and control texts are tokenized as plain
    /// text. With `add_special`, BOS is prepended when
    /// [`add_bos`](Self::add_bos) holds and EOS appended when
    /// [`add_eos`](Self::add_eos) holds.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let v = &self.vocab;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && v.add_bos {
            out.extend(v.special.bos);
        }
        let mut word_buf = Vec::new();
        let mut escaped = String::new();
        // SentencePiece puts a space in front of the text and after every
        // special token (llama.cpp's `is_prev_special`, true at the start).
        let mut prev_special = true;
        for frag in self.specials.partition(text, &v.texts, parse_special) {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(start, end) => {
                    let t = &text[start..end];
                    match &self.model {
                        Model::Bpe(merges) => {
                            for range in v.pre.split(t) {
                                word_buf.clear();
                                word_buf.extend_from_slice(&t.as_bytes()[range]);
                                merges.encode_word(
                                    &word_buf,
                                    v.pre.ignore_merges,
                                    &v.token_ids,
                                    &mut out,
                                );
                            }
                        }
                        Model::Spm(s) => {
                            spm::escape(t, v.add_space_prefix && prev_special, &mut escaped);
                            s.encode_fragment(&escaped, &v.token_ids, &mut out);
                        }
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && v.add_eos {
            out.extend(v.special.eos);
        }
        out
    }

    /// The bytes of one token as `llama_token_to_piece(special = true)`
    /// renders them: control, user-defined and unknown tokens as their text,
    /// normal tokens through the byte mapping. An id outside the vocabulary
    /// yields no bytes.
    pub fn decode_token(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], |p| p)
    }

    /// Like [`decode_token`](Self::decode_token); with `special == false`
    /// control and unknown tokens render as nothing, as in llama.cpp.
    pub fn token_piece(&self, id: u32, special: bool) -> &[u8] {
        if !special && self.attr(id) & (attr::CONTROL | attr::UNKNOWN) != 0 {
            return &[];
        }
        self.decode_token(id)
    }

    /// The concatenated bytes of `ids` (see
    /// [`token_piece`](Self::token_piece) for `special`). The result need not be valid
    /// UTF-8: a character may be split across tokens.
    pub fn decode(&self, ids: &[u32], special: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.token_piece(id, special));
        }
        out
    }

    /// Vocabulary size.
    pub fn n_vocab(&self) -> usize {
        self.vocab.texts.len()
    }

    /// Number of BPE merge rules (0 for SentencePiece, which merges by
    /// token scores).
    pub fn n_merges(&self) -> usize {
        match &self.model {
            Model::Bpe(m) => m.len(),
            Model::Spm(_) => 0,
        }
    }

    /// The tokenizer family: `gpt2` (byte-level BPE) or `llama`
    /// (SentencePiece), as `tokenizer.ggml.model` names it.
    pub fn model_name(&self) -> &'static str {
        match self.vocab.kind {
            VocabKind::Bpe => "gpt2",
            VocabKind::Spm => "llama",
        }
    }

    /// The vocabulary text of a token (in the byte-mapped alphabet for
    /// normal tokens); empty for an id outside the vocabulary.
    pub fn token_text(&self, id: u32) -> &str {
        self.vocab.texts.get(id as usize).map_or("", String::as_str)
    }

    /// The id of the token whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.token_ids.get(text).copied()
    }

    fn attr(&self, id: u32) -> u8 {
        self.vocab.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// Whether the token is a control token (after llama.cpp's fix-ups,
    /// which promote end-of-generation texts to control).
    pub fn is_control(&self, id: u32) -> bool {
        self.attr(id) & attr::CONTROL != 0
    }

    /// Whether the token is matched in prompts by its text: control,
    /// user-defined or unknown.
    pub fn is_special(&self, id: u32) -> bool {
        self.attr(id) & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
    }

    /// All special ids the vocabulary defines.
    pub fn special_ids(&self) -> &SpecialIds {
        &self.vocab.special
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.vocab.special.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.vocab.special.eos
    }

    /// End-of-turn token.
    pub fn eot(&self) -> Option<u32> {
        self.vocab.special.eot
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos && self.vocab.special.bos.is_some()
    }

    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos && self.vocab.special.eos.is_some()
    }

    /// The end-of-generation tokens, sorted: EOS, EOT, EOM, the FIM
    /// pad/repo/separator tokens and every token whose text llama.cpp
    /// recognises as ending a turn (`<|im_end|>`, `<|endoftext|>`,
    /// `<|eot_id|>`…).
    pub fn eog_ids(&self) -> &[u32] {
        &self.vocab.eog
    }

    /// Whether generating `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }
}

/// The merge rules of a byte-level BPE vocabulary.
fn read_merges(md: &Metadata, v: &Vocab) -> Result<Merges, TextError> {
    let merges = md
        .get_array(KEY_MERGES)?
        .ok_or(TextError::MissingKey(KEY_MERGES))?;
    let mut lines = Vec::with_capacity(merges.items.len());
    for (i, item) in merges.items.iter().enumerate() {
        lines.push(item.as_str().ok_or_else(|| TextError::BadMetadata {
            key: KEY_MERGES,
            reason: format!("element {i} is {}, not a string", item.type_name()),
        })?);
    }
    Ok(Merges::new(&v.texts, &v.token_ids, lines.iter().copied()))
}

/// The bytes llama.cpp's piece cache holds for one token.
fn render_piece(kind: VocabKind, text: &str, a: u8) -> Vec<u8> {
    if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
        text.as_bytes().to_vec()
    } else if a & attr::NORMAL != 0 {
        match kind {
            VocabKind::Bpe => bytes::decode_text(text),
            VocabKind::Spm => spm::unescape(text),
        }
    } else if a & attr::BYTE != 0 {
        byte_token(text).map_or_else(|| bytes::decode_text(text), |b| vec![b])
    } else {
        // Unused and undefined tokens render as nothing.
        Vec::new()
    }
}

/// The byte of a `<0xXX>` token.
fn byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

//! Pre-tokenizers: how text is cut into words before BPE merges run.
//!
//! llama.cpp selects a list of regexes by `tokenizer.ggml.pre` and applies
//! them one after the other, each one refining the pieces left by the
//! previous one (text between matches stays a piece of its own). The common
//! regexes (GPT-2's, Llama 3's, Qwen 2's) are executed there by hand-written
//! scanners whose behaviour, not the regex text, defines the reference
//! output; the scanners below follow them rule by rule. The remaining
//! regexes used by the supported families are single character-class rules
//! and are implemented directly.

use crate::unicode::{self, LETTER, MARK, NUMBER, PUNCT, WHITESPACE};

/// One splitting pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
    /// Llama 3's regex (`max_digits` 3) and Qwen 2's (`max_digits` 1):
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}|
    /// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`; with `marks`,
    /// letter runs also take combining marks (Qwen 3.5).
    Llama3 { max_digits: usize, marks: bool },
    /// GPT-4o's regex (tiktoken's o200k_base) as llama.cpp rewrites it for
    /// `std::regex`, which has no `\p{Lu}`-style classes:
    /// `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+C?|
    /// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*C?|
    /// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
    /// `C` being `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`.
    /// So "upper" means a letter other than `a-z` and "lower" a letter other
    /// than `A-Z` (every non-ASCII letter is both), and combining marks are
    /// not part of words, unlike in the original regex.
    Gpt4o,
    /// `\p{N}`: every number character alone.
    EachNumber,
    /// `\p{N}+`.
    NumberRuns,
    /// `[\p{P}\$\+<=>\^~\|]+`.
    PunctRuns,
    /// `[0-9][0-9][0-9]`.
    AsciiDigitTriples,
}

/// A named pre-tokenizer: the passes, plus the loading defaults that
/// llama.cpp ties to the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreTokenizer {
    /// The name it was selected by (`default` for the fallback).
    pub name: String,
    /// The passes, in order.
    pub rules: Vec<Rule>,
    /// Whether a word that is itself a vocabulary entry skips the merges.
    pub ignore_merges: bool,
    /// The `add_bos` default before `tokenizer.ggml.add_bos_token`.
    pub add_bos_default: bool,
}

const GPT2_FAMILY: &[&str] = &[
    "gpt-2",
    "gpt2",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v1-en",
    "jina-v2-es",
    "jina-v2-de",
    "jina-v2-code",
    "roberta-bpe",
    "mpt",
    "olmo",
    "jais",
];
const LLAMA3_FAMILY: &[&str] = &["llama3", "llama-v3", "llama-bpe", "falcon3"];
const LLAMA3_REGEX_ONLY: &[&str] = &["dbrx", "smaug-bpe"];
const QWEN2_FAMILY: &[&str] = &["qwen2", "stablelm2", "megrez"];
/// llama.cpp's `LLAMA_VOCAB_PRE_TYPE_GPT4O` names, plus `minimax-m2`,
/// whose own type shares the regex list. None of them ignores merges or
/// adds BOS by default.
const GPT4O_FAMILY: &[&str] = &["gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"];
const STARCODER_FAMILY: &[&str] = &[
    "smollm",
    "starcoder",
    "refact",
    "command-r",
    "codeshell",
    "exaone",
    "minerva-7b",
];

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp uses for `name`, or `None` when the name
    /// is not one this crate implements.
    pub fn by_name(name: &str) -> Option<PreTokenizer> {
        let (rules, ignore_merges, add_bos_default) = if GPT2_FAMILY.contains(&name) {
            (vec![Rule::Gpt2], false, false)
        } else if LLAMA3_FAMILY.contains(&name) {
            (vec![llama3(3)], true, true)
        } else if LLAMA3_REGEX_ONLY.contains(&name) {
            (vec![llama3(3)], false, false)
        } else if QWEN2_FAMILY.contains(&name) {
            (vec![llama3(1)], false, false)
        } else if name == "qwen35" {
            let rule = Rule::Llama3 {
                max_digits: 1,
                marks: true,
            };
            (vec![rule], false, false)
        } else if GPT4O_FAMILY.contains(&name) {
            (vec![Rule::Gpt4o], false, false)
        } else if STARCODER_FAMILY.contains(&name) {
            (vec![Rule::EachNumber, Rule::Gpt2], false, false)
        } else if name == "default" {
            return Some(Self::fallback());
        } else {
            return None;
        };
        Some(PreTokenizer {
            name: name.to_string(),
            rules,
            ignore_merges,
            add_bos_default,
        })
    }

    /// llama.cpp's `default` pre-tokenizer, used when the metadata names
    /// none (and, here, when it names one this crate does not know).
    pub fn fallback() -> PreTokenizer {
        PreTokenizer {
            name: "default".to_string(),
            rules: vec![
                Rule::PunctRuns,
                Rule::Gpt2,
                Rule::NumberRuns,
                Rule::AsciiDigitTriples,
            ],
            ignore_merges: false,
            add_bos_default: false,
        }
    }

    /// Cuts `text` into words, returned as byte ranges of `text`.
    pub fn split(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        let mut cps: Vec<char> = Vec::with_capacity(text.len());
        let mut byte_pos: Vec<usize> = Vec::with_capacity(text.len() + 1);
        for (i, c) in text.char_indices() {
            cps.push(c);
            byte_pos.push(i);
        }
        byte_pos.push(text.len());

        // Piece lengths in codepoints; each rule refines every piece.
        let mut pieces = vec![cps.len()];
        for rule in &self.rules {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            let mut start = 0;
            for &len in &pieces {
                let piece = Piece {
                    cps: &cps[start..start + len],
                };
                piece.split(*rule, &mut next);
                start += len;
            }
            pieces = next;
        }

        let mut out = Vec::with_capacity(pieces.len());
        let mut start = 0;
        for len in pieces {
            if len > 0 {
                out.push(byte_pos[start]..byte_pos[start + len]);
            }
            start += len;
        }
        out
    }
}

fn llama3(max_digits: usize) -> Rule {
    Rule::Llama3 {
        max_digits,
        marks: false,
    }
}

/// One piece of text being split, with the lookups the scanners use.
/// Positions past the end read as "no character": no class flags and not
/// in range, as in llama.cpp.
struct Piece<'a> {
    cps: &'a [char],
}

impl Piece<'_> {
    #[inline]
    fn cp(&self, pos: usize) -> Option<char> {
        self.cps.get(pos).copied()
    }

    #[inline]
    fn flags(&self, pos: usize) -> u8 {
        self.cp(pos).map_or(0, unicode::flags)
    }

    #[inline]
    fn has(&self, pos: usize, class: u8) -> bool {
        self.flags(pos) & class != 0
    }

    fn split(&self, rule: Rule, out: &mut Vec<usize>) {
        let mut emit = Emitter { out, prev_end: 0 };
        match rule {
            Rule::Gpt2 => self.gpt2(&mut emit),
            Rule::Llama3 { max_digits, marks } => self.llama3(max_digits, marks, &mut emit),
            Rule::Gpt4o => self.gpt4o(&mut emit),
            Rule::EachNumber => self.class_matches(&mut emit, |p, i| p.has(i, NUMBER), Some(1)),
            Rule::NumberRuns => self.class_matches(&mut emit, |p, i| p.has(i, NUMBER), None),
            Rule::PunctRuns => self.class_matches(
                &mut emit,
                |p, i| p.has(i, PUNCT) || p.cp(i).is_some_and(|c| "$+<=>^~|".contains(c)),
                None,
            ),
            Rule::AsciiDigitTriples => self.ascii_digit_triples(&mut emit),
        }
        emit.finish(self.cps.len());
    }

    /// The contraction rule `'s|'t|'re|'ve|'m|'ll|'d`, optionally ASCII
    /// case-insensitive. Returns the end of the match.
    fn contraction(&self, pos: usize, fold: bool) -> Option<usize> {
        if self.cp(pos) != Some('\'') {
            return None;
        }
        let lower = |c: Option<char>| c.map(|c| if fold { c.to_ascii_lowercase() } else { c });
        let next = lower(self.cp(pos + 1))?;
        if matches!(next, 's' | 't' | 'm' | 'd') {
            return Some(pos + 2);
        }
        let next2 = lower(self.cp(pos + 2))?;
        match (next, next2) {
            ('r', 'e') | ('v', 'e') | ('l', 'l') => Some(pos + 3),
            _ => None,
        }
    }

    /// Whitespace rules shared by the GPT-2 and Llama 3 scanners:
    /// `\s+(?!\S)` then `\s+`, then a lone character when nothing matched.
    fn whitespace_tail(&self, pos: usize, emit: &mut Emitter<'_>) -> usize {
        let mut n = 0;
        while self.has(pos + n, WHITESPACE) {
            n += 1;
        }
        let end = if n > 1 && self.cp(pos + n).is_some() {
            pos + n - 1
        } else if n > 0 {
            pos + n
        } else {
            pos + 1
        };
        emit.to(end);
        end
    }

    fn gpt2(&self, emit: &mut Emitter<'_>) {
        let len = self.cps.len();
        let mut pos = 0;
        while pos < len {
            if let Some(end) = self.contraction(pos, false) {
                emit.to(end);
                pos = end;
                continue;
            }
            let space = self.cp(pos) == Some(' ');
            let first = if space { pos + 1 } else { pos };
            let f = self.flags(first);
            let in_range = first < len;
            // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
            let class: Option<fn(u8, bool) -> bool> = if f & LETTER != 0 {
                Some(|f, _| f & LETTER != 0)
            } else if f & NUMBER != 0 {
                Some(|f, _| f & NUMBER != 0)
            } else if f & (WHITESPACE | LETTER | NUMBER) == 0 && in_range {
                Some(|f, in_range| f & (WHITESPACE | LETTER | NUMBER) == 0 && in_range)
            } else {
                None
            };
            if let Some(class) = class {
                let mut end = first;
                while class(self.flags(end), end < len) {
                    end += 1;
                }
                emit.to(end);
                pos = end;
                continue;
            }
            pos = self.whitespace_tail(pos, emit);
        }
    }

    fn llama3(&self, max_digits: usize, marks: bool, emit: &mut Emitter<'_>) {
        let len = self.cps.len();
        let word = if marks { LETTER | MARK } else { LETTER };
        let mut pos = 0;
        while pos < len {
            if let Some(end) = self.contraction(pos, true) {
                emit.to(end);
                pos = end;
                continue;
            }
            let cpt = self.cps[pos];
            let f = self.flags(pos);

            // `[^\r\n\p{L}\p{N}]?\p{L}+`
            if !(cpt == '\r' || cpt == '\n' || f & NUMBER != 0)
                && (f & word != 0 || self.flags(pos + 1) & word != 0)
            {
                let mut end = pos + 1;
                while self.flags(end) & word != 0 {
                    end += 1;
                }
                emit.to(end);
                pos = end;
                continue;
            }

            // `\p{N}{1,max_digits}`
            if f & NUMBER != 0 {
                let mut group_start = pos;
                while self.has(pos, NUMBER) {
                    pos += 1;
                    if pos - group_start >= max_digits {
                        emit.to(pos);
                        group_start = pos;
                    }
                }
                emit.to(pos);
                continue;
            }

            // ` ?[^\s\p{L}\p{N}]+[\r\n]*`. As in llama.cpp, the first test
            // looks at the character after an optional space, but checks
            // that the current one (not that one) exists.
            let other = WHITESPACE | word | NUMBER;
            let f2 = if cpt == ' ' { self.flags(pos + 1) } else { f };
            if f2 & other == 0 {
                let mut end = pos + usize::from(cpt == ' ');
                while end < len && self.flags(end) & other == 0 {
                    end += 1;
                }
                while matches!(self.cp(end), Some('\r' | '\n')) {
                    end += 1;
                }
                emit.to(end);
                pos = end;
                continue;
            }

            if let Some(end) = self.through_last_break(pos) {
                emit.to(end);
                pos = end;
                continue;
            }
            pos = self.whitespace_tail(pos, emit);
        }
    }

    /// `\s*[\r\n]+`: the whitespace run at `pos` up to and including its
    /// last line break (the greedy `\s*` backs off to it), if it has one.
    fn through_last_break(&self, pos: usize) -> Option<usize> {
        let mut n = 0;
        let mut last_break_end = None;
        while self.has(pos + n, WHITESPACE) {
            if matches!(self.cps[pos + n], '\r' | '\n') {
                last_break_end = Some(pos + n + 1);
            }
            n += 1;
        }
        last_break_end
    }

    /// The end of the run of characters satisfying `member` from `pos`.
    fn run_end(&self, pos: usize, member: impl Fn(&Self, usize) -> bool) -> usize {
        let mut end = pos;
        while end < self.cps.len() && member(self, end) {
            end += 1;
        }
        end
    }

    /// [`Rule::Gpt4o`]. llama.cpp has no hand-written scanner for it and
    /// runs the regex with `std::regex` (a backtracking, first-alternative
    /// engine) over text where each non-ASCII codepoint is replaced by a
    /// byte standing for its class; this follows that engine's backtracking
    /// alternative by alternative.
    fn gpt4o(&self, emit: &mut Emitter<'_>) {
        let len = self.cps.len();
        let mut pos = 0;
        while pos < len {
            let end = if let Some(end) = self.gpt4o_word(pos) {
                end
            } else if self.has(pos, NUMBER) {
                self.run_end(pos, |p, i| p.has(i, NUMBER) && i < pos + 3)
            } else if let Some(end) = self.gpt4o_symbols(pos) {
                end
            } else if let Some(end) = self.through_last_break(pos) {
                end
            } else {
                pos = self.whitespace_tail(pos, emit);
                continue;
            };
            emit.to(end);
            pos = end;
        }
    }

    /// The two word alternatives of [`Rule::Gpt4o`], `P?U*L+C?|P?U+L*C?`:
    /// `P` an optional character that is no line break, letter or number;
    /// `U` a letter other than `a-z`, `L` a letter other than `A-Z`; `C` a
    /// contraction. Returns the end of the match.
    fn gpt4o_word(&self, pos: usize) -> Option<usize> {
        let letter = |p: &Self, i: usize| p.has(i, LETTER);
        let upper = |p: &Self, i: usize| letter(p, i) && !p.cps[i].is_ascii_lowercase();
        let lower = |p: &Self, i: usize| letter(p, i) && !p.cps[i].is_ascii_uppercase();
        // Without the prefix, a non-letter at `pos` could not start a word,
        // so taking it whenever it qualifies loses no match.
        let prefix = self
            .cp(pos)
            .is_some_and(|c| c != '\r' && c != '\n' && !self.has(pos, LETTER | NUMBER));
        let start = pos + usize::from(prefix);
        let upper_end = self.run_end(start, upper);
        let end = if upper_end < self.cps.len() && lower(self, upper_end) {
            // `U*` took the whole run and `L+` continues after it.
            self.run_end(upper_end, lower)
        } else if let Some(last) = (start..upper_end).rev().find(|&i| lower(self, i)) {
            // `U*` gives back up to its last letter that is also "lower"
            // (a non-ASCII one), which `L+` takes alone: the run after it
            // is ASCII capitals, which `L` refuses.
            last + 1
        } else if upper_end > start {
            // `U+L*` with an empty `L*`: nothing after the run is "lower".
            upper_end
        } else {
            return None;
        };
        Some(self.contraction(end, true).unwrap_or(end))
    }

    /// ` ?[^\s\p{L}\p{N}]+[\r\n/]*` of [`Rule::Gpt4o`].
    fn gpt4o_symbols(&self, pos: usize) -> Option<usize> {
        let other = |p: &Self, i: usize| i < p.cps.len() && !p.has(i, WHITESPACE | LETTER | NUMBER);
        let start = pos + usize::from(self.cp(pos) == Some(' ') && other(self, pos + 1));
        if !other(self, start) {
            return None;
        }
        let end = self.run_end(start, other);
        Some(self.run_end(end, |p, i| matches!(p.cps[i], '\r' | '\n' | '/')))
    }

    /// Leftmost non-overlapping matches of a character class, each run
    /// capped at `max_len` characters; unmatched text in between stays a
    /// piece of its own.
    fn class_matches(
        &self,
        emit: &mut Emitter<'_>,
        member: impl Fn(&Self, usize) -> bool,
        max_len: Option<usize>,
    ) {
        let len = self.cps.len();
        let mut pos = 0;
        while pos < len {
            if !member(self, pos) {
                pos += 1;
                continue;
            }
            emit.to(pos);
            let start = pos;
            while pos < len && member(self, pos) && max_len.is_none_or(|m| pos - start < m) {
                pos += 1;
            }
            emit.to(pos);
        }
    }

    /// `[0-9][0-9][0-9]`: a run of ASCII digits yields groups of three from
    /// its start; a shorter rest is left unmatched.
    fn ascii_digit_triples(&self, emit: &mut Emitter<'_>) {
        let len = self.cps.len();
        let digit = |i: usize| self.cp(i).is_some_and(|c| c.is_ascii_digit());
        let mut pos = 0;
        while pos < len {
            if digit(pos) && digit(pos + 1) && digit(pos + 2) {
                emit.to(pos);
                emit.to(pos + 3);
                pos += 3;
            } else {
                pos += 1;
            }
        }
    }
}

/// Collects piece lengths from match ends; empty pieces are dropped.
struct Emitter<'a> {
    out: &'a mut Vec<usize>,
    prev_end: usize,
}

impl Emitter<'_> {
    #[inline]
    fn to(&mut self, end: usize) {
        if end > self.prev_end {
            self.out.push(end - self.prev_end);
            self.prev_end = end;
        }
    }

    fn finish(&mut self, len: usize) {
        self.to(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: &str, text: &str) -> Vec<String> {
        let p = PreTokenizer::by_name(pre).expect("known pre-tokenizer");
        p.split(text)
            .into_iter()
            .map(|r| text[r].to_string())
            .collect()
    }

    #[test]
    fn gpt2_basic() {
        assert_eq!(
            words("gpt-2", "Hello world's  end 123!!"),
            ["Hello", " world", "'s", " ", " end", " 123", "!!"]
        );
    }

    #[test]
    fn qwen2_digits_alone_and_newlines() {
        assert_eq!(words("qwen2", "ab 1234"), ["ab", " ", "1", "2", "3", "4"]);
        assert_eq!(words("qwen2", "a\n\n  b"), ["a", "\n\n", " ", " b"]);
        assert_eq!(words("qwen2", "x:\n"), ["x", ":\n"]);
        assert_eq!(words("qwen2", "I'M"), ["I", "'M"]);
    }

    #[test]
    fn llama3_digit_groups() {
        assert_eq!(words("llama-bpe", "1234567"), ["123", "456", "7"]);
    }

    #[test]
    fn smollm_isolates_numbers_first() {
        assert_eq!(words("smollm", "x 12"), ["x", " ", "1", "2"]);
    }

    #[test]
    fn fallback_rules() {
        let p = PreTokenizer::fallback();
        let w: Vec<_> = p
            .split("a+b 12345")
            .into_iter()
            .map(|r| &"a+b 12345"[r])
            .collect();
        assert_eq!(w, ["a", "+", "b", " ", "123", "45"]);
    }

    #[test]
    fn gpt4o_case_runs() {
        assert_eq!(words("gpt-4o", "HELLOworld"), ["HELLOworld"]);
        assert_eq!(words("gpt-4o", "helloWORLD"), ["hello", "WORLD"]);
        assert_eq!(words("gpt-4o", "McDonald's"), ["Mc", "Donald's"]);
        assert_eq!(words("gpt-4o", "DON'T stop"), ["DON'T", " stop"]);
        assert_eq!(words("gpt-4o", "we'Ve I'M"), ["we'Ve", " I'M"]);
        // A non-ASCII letter is both "upper" and "lower": `U*L+` stops
        // after the last one before ASCII capitals.
        assert_eq!(words("gpt-4o", "ÀB ÀBc"), ["À", "B", " ÀBc"]);
        assert_eq!(words("gpt-4o", "中文English"), ["中文English"]);
    }

    #[test]
    fn gpt4o_marks_digits_symbols() {
        // Combining marks are not letters for llama.cpp's rewrite.
        assert_eq!(words("gpt-4o", "e\u{301}x"), ["e", "\u{301}x"]);
        assert_eq!(words("gpt-4o", "1234567"), ["123", "456", "7"]);
        assert_eq!(words("gpt-4o", "a/b\n/"), ["a", "/b", "\n", "/"]);
        assert_eq!(words("gpt-4o", "?!\n/\r\n"), ["?!\n/\r\n"]);
        assert_eq!(words("gpt-4o", " (x"), [" (", "x"]);
    }

    #[test]
    fn gpt4o_whitespace() {
        assert_eq!(words("gpt-4o", "  \n\n  x"), ["  \n\n", " ", " x"]);
        assert_eq!(words("gpt-4o", "x \r\n y"), ["x", " \r\n", " y"]);
        assert_eq!(words("gpt-4o", "end   "), ["end", "   "]);
        assert_eq!(words("gpt-4o", "\tx \u{3000}y"), ["\tx", " ", "\u{3000}y"]);
    }

    #[test]
    fn gpt4o_names() {
        for name in ["gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"] {
            let p = PreTokenizer::by_name(name).expect(name);
            assert_eq!(p.rules, [Rule::Gpt4o]);
            assert!(!p.ignore_merges && !p.add_bos_default);
        }
    }

    #[test]
    fn unknown_name() {
        assert!(PreTokenizer::by_name("no-such-pre").is_none());
    }
}

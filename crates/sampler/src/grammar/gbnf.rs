//! llama.cpp's GBNF grammar format: a parser, its translation to
//! llguidance's Lark dialect (which does the token masking), and a small
//! character-level recognizer used to check generated text independently
//! of llguidance.
//!
//! The format: `name ::= alternatives`, one rule per line (a rule continues
//! on the next line only inside parentheses or after `|`), `"literals"`,
//! `[character classes]` and `[^negated]` ones, `.` for any character,
//! `( groups )`, the repetitions `* + ?` and `{m}`, `{m,}`, `{m,n}`, `{,n}`,
//! and `#` comments. The start rule is `root`.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::SamplerError;

/// A GBNF expression.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    /// One of several sequences.
    Alt(Vec<Expr>),
    /// Elements one after the other (empty: the empty string).
    Seq(Vec<Expr>),
    /// A literal string.
    Lit(Vec<char>),
    /// A character class: inclusive ranges, possibly negated.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// Any one character.
    Any,
    /// Another rule, by index.
    Ref(usize),
    /// `min` to `max` (unbounded when `None`) repetitions.
    Repeat {
        inner: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
}

/// A parsed GBNF grammar.
#[derive(Debug, Clone, PartialEq)]
pub struct Gbnf {
    names: Vec<String>,
    rules: Vec<Option<Expr>>,
    root: usize,
}

/// Largest bound accepted in `{m,n}`: larger counts are almost certainly a
/// mistake and would blow up the grammar.
const MAX_REPEAT: u32 = 10_000;

struct Parser<'a> {
    src: &'a [char],
    pos: usize,
    names: Vec<String>,
    index: HashMap<String, usize>,
    rules: Vec<Option<Expr>>,
    /// Where each rule was first referenced (for "undefined rule" errors).
    first_use: Vec<usize>,
}

impl Gbnf {
    /// Parses GBNF text.
    ///
    /// # Errors
    /// [`SamplerError::Grammar`] naming the line and column of a syntax
    /// error, an undefined rule, a rule defined twice, or a missing `root`.
    pub fn parse(text: &str) -> Result<Gbnf, SamplerError> {
        let src: Vec<char> = text.chars().collect();
        let mut p = Parser {
            src: &src,
            pos: 0,
            names: Vec::new(),
            index: HashMap::new(),
            rules: Vec::new(),
            first_use: Vec::new(),
        };
        p.space(true);
        while p.pos < p.src.len() {
            p.rule()?;
        }
        if let Some(i) = p.rules.iter().position(Option::is_none) {
            return Err(p.error_at(p.first_use[i], &format!("undefined rule '{}'", p.names[i])));
        }
        let Some(&root) = p.index.get("root") else {
            return Err(SamplerError::Grammar(
                "GBNF grammar has no 'root' rule".into(),
            ));
        };
        Ok(Gbnf {
            names: p.names,
            rules: p.rules,
            root,
        })
    }

    /// The grammar in llguidance's Lark dialect, starting at `root`.
    ///
    /// Every rule stays a parser rule, so each literal and character class
    /// is a lexeme of its own: GBNF's meaning is character-level, and
    /// turning regular rules into Lark terminals would hand them to a
    /// greedy lexer that changes the language (llama.cpp's
    /// `arithmetic.gbnf`, whose numbers end in optional whitespace followed
    /// by a required newline, could then never finish a line). The price is
    /// speed: such masks cost milliseconds on a large vocabulary, where a
    /// JSON schema, compiled by llguidance itself, costs microseconds.
    pub fn to_lark(&self) -> String {
        let mut out = format!("start: {}\n", self.lark_name(self.root));
        for (i, rule) in self.rules.iter().enumerate() {
            let Some(rule) = rule else { continue };
            let _ = writeln!(out, "{}: {}", self.lark_name(i), self.lark_expr(rule, true));
        }
        out
    }

    fn lark_name(&self, i: usize) -> String {
        let base: String = self.names[i]
            .chars()
            .map(|c| match c {
                'A'..='Z' => c.to_ascii_lowercase(),
                'a'..='z' | '0'..='9' => c,
                _ => '_',
            })
            .collect();
        // Lark rule names are lowercase; the index keeps `Foo` and `foo`
        // apart.
        format!("r{i}_{base}")
    }

    fn lark_expr(&self, e: &Expr, top: bool) -> String {
        match e {
            Expr::Alt(alts) => {
                let has_empty = alts
                    .iter()
                    .any(|a| matches!(a, Expr::Seq(s) if s.is_empty()));
                let parts: Vec<String> = alts
                    .iter()
                    .filter(|a| !matches!(a, Expr::Seq(s) if s.is_empty()))
                    .map(|a| self.lark_expr(a, false))
                    .collect();
                match (parts.is_empty(), has_empty) {
                    (true, _) => "\"\"".into(),
                    (false, true) => format!("({})?", parts.join(" | ")),
                    (false, false) if top => parts.join(" | "),
                    (false, false) => format!("({})", parts.join(" | ")),
                }
            }
            Expr::Seq(items) if items.is_empty() => "\"\"".into(),
            Expr::Seq(items) if items.len() == 1 => self.lark_expr(&items[0], top),
            Expr::Seq(items) => {
                let parts: Vec<String> = items.iter().map(|i| self.lark_expr(i, false)).collect();
                let s = parts.join(" ");
                if top {
                    s
                } else {
                    format!("({s})")
                }
            }
            Expr::Lit(chars) => {
                let s: String = chars.iter().collect();
                // JSON escaping is what the Lark dialect's strings accept.
                serde_json::to_string(&s).unwrap_or_else(|_| "\"\"".into())
            }
            Expr::Class { negated, ranges } => {
                let mut rx = String::from("/[");
                if *negated {
                    rx.push('^');
                }
                for &(a, b) in ranges {
                    push_rx_char(&mut rx, a);
                    if b != a {
                        rx.push('-');
                        push_rx_char(&mut rx, b);
                    }
                }
                rx.push_str("]/");
                rx
            }
            Expr::Any => "/(?s:.)/".into(),
            Expr::Ref(i) => self.lark_name(*i),
            Expr::Repeat { inner, min, max } => {
                let inner = self.lark_expr(inner, false);
                match (min, max) {
                    (0, None) => format!("{inner}*"),
                    (1, None) => format!("{inner}+"),
                    (0, Some(1)) => format!("{inner}?"),
                    (m, None) => format!("{inner}{{{m},}}"),
                    (m, Some(n)) if m == n => format!("{inner}{{{m}}}"),
                    (m, Some(n)) => format!("{inner}{{{m},{n}}}"),
                }
            }
        }
    }

    /// Whether the whole of `text` is in the grammar's language: an
    /// independent, character-level check (memoised backtracking over the
    /// set of end positions; left recursion is not supported, which GBNF
    /// grammars for llama.cpp avoid anyway).
    pub fn accepts(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let mut m = Recognizer {
            g: self,
            text: &chars,
            memo: HashMap::new(),
        };
        m.rule(self.root, 0).contains(&chars.len())
    }
}

fn push_rx_char(rx: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        rx.push(c);
    } else {
        let _ = write!(rx, "\\x{{{:X}}}", c as u32);
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.src.get(self.pos).copied()
    }

    fn error_at(&self, pos: usize, msg: &str) -> SamplerError {
        let before = &self.src[..pos.min(self.src.len())];
        let line = before.iter().filter(|&&c| c == '\n').count() + 1;
        let col = before.iter().rev().take_while(|&&c| c != '\n').count() + 1;
        SamplerError::Grammar(format!("GBNF line {line}, column {col}: {msg}"))
    }

    fn error(&self, msg: &str) -> SamplerError {
        self.error_at(self.pos, msg)
    }

    /// Skips blanks and comments, and line ends when `newline_ok`.
    fn space(&mut self, newline_ok: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\r' | '\n' if newline_ok => self.pos += 1,
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn is_word(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '-' || c == '_'
    }

    fn name(&mut self) -> Result<String, SamplerError> {
        let start = self.pos;
        while self.peek().is_some_and(Self::is_word) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.error("expected a rule name"));
        }
        Ok(self.src[start..self.pos].iter().collect())
    }

    fn rule_index(&mut self, name: &str, at: usize) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        self.rules.push(None);
        self.first_use.push(at);
        i
    }

    fn rule(&mut self) -> Result<(), SamplerError> {
        let at = self.pos;
        let name = self.name()?;
        self.space(false);
        if !self.src[self.pos..].starts_with(&[':', ':', '=']) {
            return Err(self.error(&format!("expected '::=' after rule name '{name}'")));
        }
        self.pos += 3;
        self.space(true);
        let body = self.alternates(false)?;
        let i = self.rule_index(&name, at);
        if self.rules[i].is_some() {
            return Err(self.error_at(at, &format!("rule '{name}' is defined twice")));
        }
        self.rules[i] = Some(body);
        match self.peek() {
            None => {}
            Some('\r') | Some('\n') => self.pos += 1,
            Some(c) => return Err(self.error(&format!("unexpected '{c}': expected a line end"))),
        }
        self.space(true);
        Ok(())
    }

    fn alternates(&mut self, nested: bool) -> Result<Expr, SamplerError> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Expr::Seq(Vec::new()))
        } else {
            Expr::Alt(alts)
        })
    }

    fn sequence(&mut self, nested: bool) -> Result<Expr, SamplerError> {
        let mut items: Vec<Expr> = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    let mut lit = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.error("unterminated string literal")),
                            Some('"') => break,
                            Some(_) => lit.push(self.char()?),
                        }
                    }
                    self.pos += 1;
                    items.push(Expr::Lit(lit));
                }
                '[' => items.push(self.class()?),
                '.' => {
                    self.pos += 1;
                    items.push(Expr::Any);
                }
                '(' => {
                    self.pos += 1;
                    self.space(true);
                    let inner = self.alternates(true)?;
                    if self.peek() != Some(')') {
                        return Err(self.error("expected ')'"));
                    }
                    self.pos += 1;
                    items.push(inner);
                }
                '*' | '+' | '?' | '{' => {
                    let Some(last) = items.pop() else {
                        return Err(self.error(&format!("'{c}' with nothing before it to repeat")));
                    };
                    let (min, max) = self.repetition()?;
                    items.push(Expr::Repeat {
                        inner: Box::new(last),
                        min,
                        max,
                    });
                    self.space(nested);
                    continue;
                }
                c if Self::is_word(c) => {
                    let at = self.pos;
                    let name = self.name()?;
                    let i = self.rule_index(&name, at);
                    items.push(Expr::Ref(i));
                }
                '<' | '!' => {
                    return Err(self.error("token references (<[id]>) are not supported"));
                }
                _ => break,
            }
            self.space(nested);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(Expr::Seq(Vec::new()))
        } else {
            Expr::Seq(items)
        })
    }

    fn repetition(&mut self) -> Result<(u32, Option<u32>), SamplerError> {
        let c = self.peek();
        self.pos += 1;
        match c {
            Some('*') => return Ok((0, None)),
            Some('+') => return Ok((1, None)),
            Some('?') => return Ok((0, Some(1))),
            _ => {}
        }
        self.space(true);
        let min = self.int()?.unwrap_or(0);
        self.space(true);
        let max = if self.peek() == Some(',') {
            self.pos += 1;
            self.space(true);
            self.int()?
        } else {
            Some(min)
        };
        self.space(true);
        if self.peek() != Some('}') {
            return Err(self.error("expected '}' to close a repetition"));
        }
        self.pos += 1;
        if max.is_some_and(|m| m < min) {
            return Err(self.error(&format!(
                "repetition {{{min},{}}} has max below min",
                max.unwrap_or(0)
            )));
        }
        if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT) {
            return Err(self.error(&format!(
                "repetition counts above {MAX_REPEAT} are not supported"
            )));
        }
        Ok((min, max))
    }

    fn int(&mut self) -> Result<Option<u32>, SamplerError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Ok(None);
        }
        let s: String = self.src[start..self.pos].iter().collect();
        s.parse()
            .map(Some)
            .map_err(|_| self.error_at(start, &format!("repetition count '{s}' is too large")))
    }

    fn class(&mut self) -> Result<Expr, SamplerError> {
        self.pos += 1; // '['
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated character class")),
                Some(']') => break,
                Some(_) => {
                    let a = self.char()?;
                    let mut b = a;
                    if self.peek() == Some('-')
                        && self.src.get(self.pos + 1).is_some_and(|&c| c != ']')
                    {
                        self.pos += 1;
                        b = self.char()?;
                        if b < a {
                            return Err(
                                self.error(&format!("character range {a:?}-{b:?} is reversed"))
                            );
                        }
                    }
                    ranges.push((a, b));
                }
            }
        }
        self.pos += 1; // ']'
        Ok(Expr::Class { negated, ranges })
    }

    /// One character of a literal or class, with escapes.
    fn char(&mut self) -> Result<char, SamplerError> {
        let Some(c) = self.peek() else {
            return Err(self.error("unexpected end of grammar"));
        };
        self.pos += 1;
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.peek() else {
            return Err(self.error("unexpected end of grammar after '\\'"));
        };
        self.pos += 1;
        let hex = |p: &mut Self, n: usize| -> Result<char, SamplerError> {
            let digits: String = p.src.get(p.pos..p.pos + n).unwrap_or(&[]).iter().collect();
            let v = u32::from_str_radix(&digits, 16)
                .ok()
                .filter(|_| digits.len() == n)
                .ok_or_else(|| p.error(&format!("expected {n} hex digits")))?;
            p.pos += n;
            char::from_u32(v).ok_or_else(|| p.error(&format!("\\x{v:X} is not a character")))
        };
        match e {
            'x' => hex(self, 2),
            'u' => hex(self, 4),
            'U' => hex(self, 8),
            'n' => Ok('\n'),
            'r' => Ok('\r'),
            't' => Ok('\t'),
            c if c.is_ascii_punctuation() => Ok(c),
            c => Err(self.error(&format!("unknown escape '\\{c}'"))),
        }
    }
}

/// The character-level recognizer behind [`Gbnf::accepts`].
struct Recognizer<'a> {
    g: &'a Gbnf,
    text: &'a [char],
    /// Ends reachable from (rule, start); `None` while being computed.
    memo: HashMap<(usize, usize), Option<Vec<usize>>>,
}

impl Recognizer<'_> {
    fn rule(&mut self, r: usize, pos: usize) -> Vec<usize> {
        match self.memo.get(&(r, pos)) {
            Some(Some(ends)) => return ends.clone(),
            // Left recursion: no progress through this path.
            Some(None) => return Vec::new(),
            None => {}
        }
        self.memo.insert((r, pos), None);
        let ends = match &self.g.rules[r] {
            Some(e) => self.ends(e, pos),
            None => Vec::new(),
        };
        self.memo.insert((r, pos), Some(ends.clone()));
        ends
    }

    fn ends(&mut self, e: &Expr, pos: usize) -> Vec<usize> {
        let mut out = match e {
            Expr::Alt(alts) => alts.iter().flat_map(|a| self.ends(a, pos)).collect(),
            Expr::Seq(items) => {
                let mut cur = vec![pos];
                for it in items {
                    let mut next: Vec<usize> = cur.iter().flat_map(|&p| self.ends(it, p)).collect();
                    next.sort_unstable();
                    next.dedup();
                    cur = next;
                    if cur.is_empty() {
                        break;
                    }
                }
                cur
            }
            Expr::Lit(chars) => {
                let end = pos + chars.len();
                if self.text.get(pos..end) == Some(chars.as_slice()) {
                    vec![end]
                } else {
                    Vec::new()
                }
            }
            Expr::Class { negated, ranges } => match self.text.get(pos) {
                Some(&c) if ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negated => {
                    vec![pos + 1]
                }
                _ => Vec::new(),
            },
            Expr::Any => {
                if pos < self.text.len() {
                    vec![pos + 1]
                } else {
                    Vec::new()
                }
            }
            Expr::Ref(r) => self.rule(*r, pos),
            Expr::Repeat { inner, min, max } => {
                let mut all = Vec::new();
                let mut cur = vec![pos];
                let mut seen = std::collections::HashSet::new();
                let mut count = 0u32;
                loop {
                    if count >= *min {
                        all.extend(cur.iter().copied());
                    }
                    if max.is_some_and(|m| count >= m) || cur.is_empty() {
                        break;
                    }
                    let mut next: Vec<usize> =
                        cur.iter().flat_map(|&p| self.ends(inner, p)).collect();
                    next.sort_unstable();
                    next.dedup();
                    count += 1;
                    // Past the minimum, positions already reached add
                    // nothing new (and would loop on empty matches).
                    if count > *min {
                        next.retain(|p| seen.insert(*p));
                    }
                    cur = next;
                }
                all
            }
        };
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_recognizes_a_small_grammar() {
        let g = Gbnf::parse(
            r#"
# a list of numbers
root ::= "[" ws ( num ("," ws num)* )? "]"
num  ::= "-"? [0-9]+
ws   ::= | " "
"#,
        )
        .unwrap();
        for ok in ["[]", "[1]", "[1, -22,3]", "[ 7]"] {
            assert!(g.accepts(ok), "{ok}");
        }
        for bad in ["", "[", "[1,]", "[a]", "[1 ]", "[--1]"] {
            assert!(!g.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn escapes_classes_and_bounded_repeats() {
        let g = Gbnf::parse(r#"root ::= [^"\\\x00-\x1F] "\u00e9" [a-c]{2,3} "\t"{1} .?"#).unwrap();
        assert!(g.accepts("xéab\t"));
        assert!(g.accepts("xéabc\t!"));
        assert!(!g.accepts("\"éab\t"));
        assert!(!g.accepts("xéa\t"));
        assert!(!g.accepts("xéabcd\t"));
        let lark = g.to_lark();
        assert!(lark.contains("\\x{22}"), "{lark}");
        assert!(lark.contains("{2,3}"), "{lark}");
    }

    #[test]
    fn multi_line_rules_follow_llama_cpp() {
        // A rule continues on the next line inside parentheses and after
        // '|', and ends at a line end otherwise.
        let g = Gbnf::parse("root ::= (\n  \"a\"\n  | \"b\" )\n  x\nx ::= \"c\"").unwrap_err();
        assert!(matches!(g, SamplerError::Grammar(m) if m.contains("line 4")));
        let g = Gbnf::parse("root ::= (\n  \"a\"\n  | \"b\" ) x\nx ::= \"c\"").unwrap();
        assert!(g.accepts("ac") && g.accepts("bc") && !g.accepts("c"));
    }

    #[test]
    fn errors_name_the_place() {
        let err = |s: &str| match Gbnf::parse(s).unwrap_err() {
            SamplerError::Grammar(m) => m,
            e => panic!("{e}"),
        };
        assert!(err("root ::= foo").contains("undefined rule 'foo'"));
        assert!(err("start ::= \"a\"").contains("no 'root' rule"));
        assert!(err("root ::= \"a").contains("unterminated string"));
        assert!(err("root ::= [a-").contains("unterminated character class"));
        assert!(err("root \"a\"").contains("expected '::='"));
        assert!(err("root ::= \"a\"\nroot ::= \"b\"").contains("defined twice"));
        assert!(err("root ::= \"\\q\"").contains("unknown escape"));
        assert!(err("root ::= * \"a\"").contains("nothing before it"));
        assert!(err("root ::= \"a\"{3,1}").contains("max below min"));
        assert!(err("root ::= (\"a\"").contains("expected ')'"));
    }
}

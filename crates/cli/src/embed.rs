//! `minfer embed`: the embeddings of texts, as llama.cpp's
//! `llama-embedding` computes them.

use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use minfer_engine::{Pooling, Store};

use crate::runtime::{self, RuntimeArgs};

/// Arguments of `minfer embed`. `--dump-graph` writes the generation
/// graphs, which an embedding does not run, so it is hidden and refused.
#[derive(clap::Args)]
#[command(mut_arg("dump_graph", |a| a.hide(true)))]
#[command(after_help = "\
An embedding is the model's final hidden state: after its output norm, \
before the LM head (what llama.cpp returns for decoder models). Each text is \
tokenized as `minfer tokenize` does (special tokens parsed, the model's \
BOS/EOS rule applied), all texts go through one forward pass as separate \
sequences, and each one's per-token states are pooled into one vector.

The default pooling is the model's own (`{arch}.pooling_type` in the GGUF). \
Plain chat or code models have none, and then, as in llama-embedding, every \
token gets its vector (`none`); pass `--pooling mean` or `--pooling last` for \
one vector per text.

Output: JSON (default), an array with one element per text: the vector, or \
with `--pooling none` an array of per-token vectors. `--format text`: one \
vector per line, values separated by spaces (`none`: one line per token, a \
blank line after each text).

Examples:
  minfer embed qwen2.5-coder-0.5b-instruct --pooling mean \"fn main() {}\" \"hello\"
  printf 'first text\\nsecond text\\n' | minfer embed MODEL --pooling last --format text")]
pub struct Args {
    /// Model file, known name or hf:OWNER/REPO/FILE.gguf.
    model: String,
    /// The texts to embed, one vector each. Without any, each non-empty
    /// line of stdin is a text.
    texts: Vec<String>,
    /// How a text's token vectors become one: mean, cls (the first
    /// token's), last (the last token's) or none (every token's).
    /// Default: the model's pooling type, `none` when it has none.
    #[arg(long, value_parser = parse_pooling)]
    pooling: Option<Pooling>,
    /// Print the vectors as computed, without scaling them to unit length
    /// (llama-embedding's `--embd-normalize -1`; the default is its `2`,
    /// Euclidean).
    #[arg(long = "no-normalize")]
    no_normalize: bool,
    /// Output format: json or text.
    #[arg(long, default_value = "json", value_parser = ["json", "text"])]
    format: String,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// `--pooling`: the poolings an embedding can use (rank needs a classifier
/// head, which no supported model has).
fn parse_pooling(s: &str) -> Result<Pooling, String> {
    match Pooling::parse(s) {
        Some(Pooling::Rank) | None => Err("expected mean, cls, last or none".into()),
        Some(p) => Ok(p),
    }
}

pub fn run(store: &Store, args: Args) -> Result<()> {
    let texts = if args.texts.is_empty() {
        read_lines(std::io::stdin().lock())?
    } else {
        args.texts.clone()
    };
    anyhow::ensure!(
        !texts.is_empty(),
        "no text to embed: give texts as arguments or lines on stdin"
    );
    anyhow::ensure!(
        args.runtime.diag.dump_graph.is_none(),
        "--dump-graph writes the generation graphs; `minfer embed` has no use for it"
    );
    let diag = crate::trace::Diag::start(&args.runtime.diag)?;
    let loaded = runtime::load(store, &args.model)?;
    let pooling = match args.pooling {
        Some(p) => p,
        None => loaded.pooling()?,
    };
    let mut rt = loaded.runtime(args.runtime.engine_config()?)?;
    let inputs: Vec<Vec<u32>> = texts.iter().map(|t| loaded.tokenize(t)).collect();
    tracing::info!(
        texts = inputs.len(),
        tokens = inputs.iter().map(Vec::len).sum::<usize>(),
        %pooling,
        "embedding"
    );
    let vectors = if args.no_normalize {
        rt.embed_raw(&inputs, pooling)?
    } else {
        rt.embed(&inputs, pooling)?
    };
    let n_embd = rt.n_embd();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.format == "text" {
        write_text(&mut out, &vectors, n_embd, pooling)?;
    } else {
        write_json(&mut out, &vectors, n_embd, pooling)?;
    }
    out.flush()?;
    drop(out);
    crate::runtime::log_kv_usage(&rt);
    diag.finish()
}

/// The non-empty lines of `r`, without their line ends.
fn read_lines(r: impl BufRead) -> Result<Vec<String>> {
    let mut texts = Vec::new();
    for line in r.lines() {
        let line = line.context("cannot read stdin")?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if !line.is_empty() {
            texts.push(line.to_string());
        }
    }
    Ok(texts)
}

fn write_json(
    out: &mut impl Write,
    vectors: &[Vec<f32>],
    n_embd: usize,
    pooling: Pooling,
) -> Result<()> {
    let value = if pooling == Pooling::None {
        let per_token: Vec<Vec<&[f32]>> =
            vectors.iter().map(|v| v.chunks(n_embd).collect()).collect();
        serde_json::to_string(&per_token)?
    } else {
        serde_json::to_string(vectors)?
    };
    writeln!(out, "{value}")?;
    Ok(())
}

fn write_text(
    out: &mut impl Write,
    vectors: &[Vec<f32>],
    n_embd: usize,
    pooling: Pooling,
) -> Result<()> {
    for v in vectors {
        for row in v.chunks(n_embd) {
            let line: Vec<String> = row.iter().map(f32::to_string).collect();
            writeln!(out, "{}", line.join(" "))?;
        }
        if pooling == Pooling::None {
            writeln!(out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_texts_are_the_non_empty_lines() {
        let got = read_lines("a b\r\n\nc\n".as_bytes()).unwrap();
        assert_eq!(got, ["a b", "c"]);
    }

    #[test]
    fn rank_pooling_is_refused_on_the_command_line() {
        assert_eq!(parse_pooling("LAST"), Ok(Pooling::Last));
        assert!(parse_pooling("rank").is_err());
        assert!(parse_pooling("max").is_err());
    }

    #[test]
    fn formats() {
        let v = vec![vec![1.0, 0.5, -0.25, 2.0]];
        let mut s = Vec::new();
        write_json(&mut s, &v, 2, Pooling::None).unwrap();
        assert_eq!(String::from_utf8(s).unwrap(), "[[[1.0,0.5],[-0.25,2.0]]]\n");
        let mut s = Vec::new();
        write_json(&mut s, &v, 4, Pooling::Mean).unwrap();
        assert_eq!(String::from_utf8(s).unwrap(), "[[1.0,0.5,-0.25,2.0]]\n");
        let mut s = Vec::new();
        write_text(&mut s, &v, 2, Pooling::None).unwrap();
        assert_eq!(String::from_utf8(s).unwrap(), "1 0.5\n-0.25 2\n\n");
    }
}

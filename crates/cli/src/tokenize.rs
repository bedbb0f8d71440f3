//! `minfer tokenize`: the token ids of a text.

use std::io::Write;

use anyhow::Result;
use minfer_engine::Store;

/// Arguments of `minfer tokenize`.
#[derive(clap::Args)]
pub struct Args {
    /// Model file, known name or hf:OWNER/REPO/FILE.gguf.
    model: String,
    /// The text to tokenize. Special tokens such as <|im_start|> are
    /// parsed as special, and the model's BOS rule applies, as llama.cpp
    /// does.
    text: String,
    /// Print a JSON array of ids.
    #[arg(long)]
    json: bool,
    /// Treat special-token text as plain text.
    #[arg(long)]
    no_parse_special: bool,
    /// Do not add BOS/EOS even where the model asks for them.
    #[arg(long)]
    no_add_special: bool,
}

pub fn run(store: &Store, args: Args) -> Result<()> {
    let tok = minfer_engine::load_tokenizer(store, &args.model)?;
    let ids = tok.encode(&args.text, !args.no_add_special, !args.no_parse_special);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&ids)?)?;
    } else {
        let s: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(out, "{}", s.join(" "))?;
    }
    Ok(())
}

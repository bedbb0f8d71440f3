//! `minfer pull` and `minfer list`.

use std::io::Write;

use anyhow::Result;
use minfer_store::{fmt_bytes, known_models, ModelSpec, Store};

/// Arguments of `minfer pull`.
#[derive(clap::Args)]
pub struct PullArgs {
    /// Models to pull: known names or hf:OWNER/REPO/FILE.gguf. Without any,
    /// every known model is pulled. Models already present and verified are
    /// left alone.
    models: Vec<String>,
}

/// Arguments of `minfer list`.
#[derive(clap::Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn pull(store: &Store, args: PullArgs) -> Result<()> {
    let specs: Vec<String> = if args.models.is_empty() {
        known_models().iter().map(|m| m.name.to_string()).collect()
    } else {
        args.models
    };
    let mut out = std::io::stdout().lock();
    for spec in &specs {
        let parsed = ModelSpec::parse(spec)?;
        let pulled = store.pull(&parsed)?;
        let what = if pulled.fetched {
            "pulled"
        } else {
            "already present"
        };
        eprintln!("{spec}: {what}");
        writeln!(out, "{}", pulled.path.display())?;
    }
    Ok(())
}

pub fn list(store: &Store, args: ListArgs) -> Result<()> {
    let entries = store.list()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let rows: Vec<_> = entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.name,
                    "path": e.path,
                    "present": e.present,
                    "size": e.size,
                    "description": e.description,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<32} {:>10}  {:<10} DESCRIPTION",
        "NAME", "SIZE", "STATUS"
    )?;
    for e in &entries {
        let size = e.size.map(fmt_bytes).unwrap_or_default();
        let status = if e.present { "pulled" } else { "-" };
        writeln!(
            out,
            "{:<32} {size:>10}  {status:<10} {}",
            e.name, e.description
        )?;
    }
    writeln!(out, "\nstore: {}", store.models_dir().display())?;
    Ok(())
}

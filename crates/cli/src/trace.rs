//! `--trace`, `--dump-graph` and `--timings`: the options that show what a
//! run did, shared by `run`, `chat`, `bench` and `serve`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use minfer_engine::trace::{self, rec};
use minfer_engine::{EngineConfig, LoadedModel};
use serde_json::{json, Map, Value};

/// Events each thread can record before the trace starts dropping them
/// (64 bytes each, reserved per thread on its first event and only paged
/// in as it fills).
const LANE_CAPACITY: usize = 1 << 20;

/// Options that make a run observable.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DiagArgs {
    /// Record a trace of the run and write it to FILE when the command
    /// ends, as Chrome trace-event JSON (open it in ui.perfetto.dev or
    /// chrome://tracing, or turn it into a page with `minfer viz`): one
    /// track per thread, spans for tokenize, prefill, every decode step,
    /// every graph op (name, type, shape, weight bytes read), sampling and
    /// detokenize, counters for tokens/s and KV cells in use, and for
    /// `serve` one track per request.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write the prefill and the decode graph to FILE and exit without
    /// generating: Graphviz DOT when FILE ends in .dot (render it with
    /// `dot -Tsvg`), JSON when it ends in .json (every node's name, op,
    /// shape, type, buffer; fused-away nodes listed).
    #[arg(long = "dump-graph", value_name = "FILE", value_parser = parse_dump_path)]
    pub dump_graph: Option<PathBuf>,
    /// Print where the time went when the command ends: tokenize,
    /// prefill, forward, sampling and detokenize, graph builds and reuses,
    /// and per graph kind a table of time per op type (share, count, time
    /// per forward).
    #[arg(long)]
    pub timings: bool,
}

/// `--dump-graph`: a path ending in .dot or .json.
fn parse_dump_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    match dump_format(&p) {
        Some(_) => Ok(p),
        None => Err("the file name must end in .dot or .json".into()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum DumpFormat {
    Dot,
    Json,
}

fn dump_format(p: &Path) -> Option<DumpFormat> {
    let ext = p.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "dot" | "gv" => Some(DumpFormat::Dot),
        "json" => Some(DumpFormat::Json),
        _ => None,
    }
}

/// Checks, before any work, that a file can be created next to `path`,
/// so that a bad path fails at once instead of after the run.
fn probe_writable(path: &Path, what: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = dir.join(format!(".minfer-probe-{}", std::process::id()));
    std::fs::File::create(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .with_context(|| format!("cannot write the {what} file {}", path.display()))?;
    if path.is_dir() {
        anyhow::bail!(
            "cannot write the {what} file {}: it is a directory",
            path.display()
        );
    }
    Ok(())
}

/// The observation a command was asked for, started before the model loads.
pub struct Diag {
    trace: Option<PathBuf>,
    dump: Option<PathBuf>,
    timings: bool,
}

impl Diag {
    /// Checks the output paths and starts recording when a trace or
    /// timings were asked for.
    pub fn start(args: &DiagArgs) -> Result<Diag> {
        if let Some(p) = &args.trace {
            probe_writable(p, "trace")?;
        }
        if let Some(p) = &args.dump_graph {
            probe_writable(p, "graph dump")?;
        }
        if args.trace.is_some() || args.timings {
            trace::start_recording(LANE_CAPACITY);
        }
        Ok(Diag {
            trace: args.trace.clone(),
            dump: args.dump_graph.clone(),
            timings: args.timings,
        })
    }

    /// With `--dump-graph`, writes the prefill graph for `n_prompt`
    /// tokens and the decode graph of `loaded` under `cfg`, and returns
    /// `true` (the command should end); otherwise `false`.
    pub fn dump_graphs(
        &self,
        loaded: &LoadedModel,
        cfg: EngineConfig,
        n_prompt: usize,
    ) -> Result<bool> {
        let Some(path) = &self.dump else {
            return Ok(false);
        };
        let mut rt = loaded.runtime(cfg)?;
        let dumps = rt.dump_graphs(n_prompt)?;
        match dump_format(path) {
            Some(DumpFormat::Dot) => {
                let dot = minfer_engine::trace::dumps_to_dot(&dumps);
                trace::write_atomically(path, |w| w.write_all(dot.as_bytes()))?;
            }
            _ => {
                let v = json!({ "model": loaded.name(), "graphs": dumps });
                trace::write_json_atomically(path, &v)?;
            }
        }
        eprintln!("graph dump written to {}", path.display());
        Ok(true)
    }

    /// Writes the trace file and prints the timings, as asked.
    pub fn finish(&self) -> Result<()> {
        if self.trace.is_none() && !self.timings {
            return Ok(());
        }
        rec::stop();
        let r = rec::snapshot();
        if let Some(path) = &self.trace {
            let v = trace::chrome_json(&r, json!({ "graphs": graphs_of(&r) }));
            trace::write_chrome_trace(path, &v)?;
            eprintln!("trace written to {}", path.display());
        }
        if self.timings {
            eprint!("{}", trace::Summary::of(&r).render());
        }
        Ok(())
    }
}

/// The graphs a recording knows, in the dump format the viewer reads
/// (without buffers or fused-away nodes, which only a dump has).
fn graphs_of(r: &rec::Recording) -> Vec<Value> {
    r.graphs
        .iter()
        .map(|g| {
            let mut census: Map<String, Value> = Map::new();
            for n in &g.nodes {
                let c = census.entry(n.op.to_string()).or_insert(json!(0));
                *c = json!(c.as_u64().unwrap_or(0) + 1);
            }
            let nodes: Vec<Value> = g
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    json!({
                        "id": i, "name": n.name, "op": n.op, "shape": n.shape,
                        "dtype": n.dtype, "srcs": n.srcs, "weight_bytes": n.weight_bytes,
                    })
                })
                .collect();
            json!({
                "kind": g.kind, "n_tokens": g.n_tokens, "census": census,
                "nodes": nodes,
                "output": g.nodes.len().saturating_sub(1),
            })
        })
        .collect()
}

//! Model presets: an INI file of named models, each with the settings it
//! runs with, in llama-server's `--models-preset` format.
//!
//! ```ini
//! [*]
//! c = 8192                 ; every model: a context of 8192
//!
//! [coder]
//! model = /models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
//! np = 2
//! pinned = true            ; never unloaded
//! ```
//!
//! A section names a model: a new one (with `model = FILE`, a known name
//! or `hf:…`), or one the server already lists, whose settings it changes.
//! Keys are `minfer serve`'s and llama-server's flag names without the
//! dashes, long or short. The section's keys win over `[*]`'s, which win
//! over the server's own flags. Keys for settings minfer has no use for
//! (llama-server's GPU offload split, for one) are named on stderr and
//! ignored, so one file serves both servers; a value that does not parse
//! is an error naming the file and line.

use std::path::Path;

use crate::config::ModelConfig;
use crate::template::TemplateChoice;

/// One model of a preset file.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    /// The section's name: the model's id.
    pub name: String,
    /// `model = …`: the file, known name or `hf:…` (none: the section
    /// changes the settings of a model listed otherwise).
    pub model: Option<String>,
    /// Loaded when the server starts (`load-on-startup`).
    pub load_on_startup: bool,
    /// Its settings, the `[*]` section's first.
    settings: Vec<Setting>,
}

/// A key, its value and the line they are on.
type Setting = (String, String, usize);

/// A preset file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct PresetError {
    /// The file.
    pub file: String,
    /// The line (1-based; 0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads a preset file.
///
/// # Errors
/// [`PresetError`] when it cannot be read, or a line is neither a section,
/// a `key = value` nor a comment.
pub fn read(path: &Path) -> Result<Vec<Preset>, PresetError> {
    let text = std::fs::read_to_string(path).map_err(|e| PresetError {
        file: path.display().to_string(),
        line: 0,
        message: e.to_string(),
    })?;
    parse(&text).map_err(|(line, message)| PresetError {
        file: path.display().to_string(),
        line,
        message,
    })
}

/// The presets of an INI text; errors are (line, message).
pub fn parse(text: &str) -> Result<Vec<Preset>, (usize, String)> {
    let mut global: Vec<Setting> = Vec::new();
    let mut sections: Vec<(String, Vec<Setting>)> = Vec::new();
    let mut in_global = true;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .ok_or((n, format!("`{line}` opens a section but does not close it")))?
                .trim();
            if name.is_empty() {
                return Err((n, "a section needs a name".into()));
            }
            in_global = name == "*";
            if !in_global {
                sections.push((name.to_string(), Vec::new()));
            }
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or((n, format!("`{line}` is not `key = value`")))?;
        let key = key.trim().to_string();
        let value = unquote(value.trim()).to_string();
        match sections.last_mut() {
            Some((_, kv)) if !in_global => kv.push((key, value, n)),
            // Keys before any section (llama-server's `version = 1`) and
            // those of `[*]` apply to every model.
            _ => global.push((key, value, n)),
        }
    }
    let mut out = Vec::new();
    for (name, kv) in sections {
        let mut settings: Vec<Setting> = global
            .iter()
            .filter(|(k, _, _)| k != "version")
            .cloned()
            .collect();
        settings.extend(kv);
        let mut p = Preset {
            name,
            model: None,
            load_on_startup: false,
            settings: Vec::new(),
        };
        for (key, value, line) in settings {
            match key.as_str() {
                "model" | "m" => p.model = Some(value),
                // A Hugging Face repository: a spec the store resolves
                // when the model loads.
                "hf-repo" | "hfr" | "hf" => p.model = Some(format!("hf:{value}")),
                "load-on-startup" => {
                    p.load_on_startup = parse_bool(&value).map_err(|e| (line, e))?;
                }
                _ => p.settings.push((key, value, line)),
            }
        }
        out.push(p);
    }
    Ok(out)
}

impl Preset {
    /// `base` with this preset's settings applied; keys minfer does not
    /// use are returned, to be reported.
    ///
    /// # Errors
    /// (line, message) for a value that does not parse.
    pub fn apply(&self, base: &ModelConfig) -> Result<(ModelConfig, Vec<String>), (usize, String)> {
        let mut cfg = base.clone();
        let mut ignored = Vec::new();
        for (key, value, line) in &self.settings {
            let known = set(&mut cfg, key, value).map_err(|e| (*line, format!("{key}: {e}")))?;
            if !known {
                ignored.push(key.clone());
            }
        }
        Ok((cfg, ignored))
    }
}

/// Sets one key; false for a key minfer has no use for.
fn set(cfg: &mut ModelConfig, key: &str, value: &str) -> Result<bool, String> {
    let key = key.trim_start_matches('-');
    match key {
        "c" | "ctx-size" | "n-ctx" => cfg.engine.n_ctx = num(value)?,
        "t" | "threads" => cfg.engine.n_threads = num::<usize>(value)?.max(1),
        "ngl" | "n-gpu-layers" | "gpu-layers" => cfg.engine.n_gpu_layers = Some(num(value)?),
        "np" | "parallel" => cfg.n_parallel = num::<usize>(value)?.max(1),
        "n" | "n-predict" => cfg.n_predict = num::<i64>(value)?.max(0) as usize,
        "temp" | "temperature" => cfg.temp = Some(num(value)?),
        "seed" => cfg.seed = u64::try_from(num::<i64>(value)?).ok(),
        "alias" => cfg.alias = Some(value.to_string()),
        "tags" => cfg.tags = value.split(',').map(|t| t.trim().to_string()).collect(),
        "chat-template" => cfg.chat_template = Some(TemplateChoice::Named(value.to_string())),
        "chat-template-file" => cfg.chat_template = Some(TemplateChoice::File(value.into())),
        "md" | "model-draft" | "draft" => {
            let spec = cfg.speculation.as_ref().map(|s| s.1).unwrap_or_default();
            cfg.speculation = Some((Some(value.to_string()), spec));
        }
        "pinned" => cfg.pinned = parse_bool(value)?,
        "reasoning" => cfg.reasoning = crate::config::parse_reasoning(value)?,
        "reasoning-budget" => cfg.reasoning = crate::config::reasoning_budget(num(value)?)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("`{v}` is not a number"))
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!("`{v}` is not true or false")),
    }
}

fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ModelConfig {
        crate::testing::model_config()
    }

    #[test]
    fn sections_global_keys_and_precedence() {
        let text = "version = 1\n; a comment\n[*]\nc = 2048\nnp = 3\n\n[coder]\nmodel = /m/a.gguf\nc = 4096\npinned = true\nload-on-startup = 1\n\n[other]\nn-gpu-layers = 99\nsplit-mode = row\n";
        let presets = parse(text).unwrap();
        assert_eq!(presets.len(), 2);
        let coder = &presets[0];
        assert_eq!(
            (coder.name.as_str(), coder.model.as_deref()),
            ("coder", Some("/m/a.gguf"))
        );
        assert!(coder.load_on_startup);
        let (cfg, ignored) = coder.apply(&base()).unwrap();
        assert_eq!(
            (cfg.engine.n_ctx, cfg.n_parallel, cfg.pinned),
            (4096, 3, true)
        );
        assert!(ignored.is_empty());
        let (cfg, ignored) = presets[1].apply(&base()).unwrap();
        assert_eq!(
            (cfg.engine.n_ctx, cfg.engine.n_gpu_layers),
            (2048, Some(99))
        );
        assert_eq!(ignored, vec!["split-mode".to_string()]);
        assert!(presets[1].model.is_none());
    }

    #[test]
    fn bad_lines_and_values_name_the_line() {
        assert_eq!(parse("[a]\nno equals\n").unwrap_err().0, 2);
        assert_eq!(parse("[open\n").unwrap_err().0, 1);
        let p = parse("[a]\n\nc = lots\n").unwrap();
        let (line, msg) = p[0].apply(&base()).unwrap_err();
        assert_eq!(line, 3);
        assert!(msg.contains("c:") && msg.contains("lots"), "{msg}");
    }

    #[test]
    fn reasoning_keys() {
        let text = "[a]\nreasoning = off\n[b]\nreasoning-budget = 0\n[c]\nreasoning-budget = -1\n[d]\nreasoning-budget = 512\n";
        let p = parse(text).unwrap();
        let got = |i: usize| p[i].apply(&base()).map(|(c, _)| c.reasoning);
        assert_eq!(got(0), Ok(Some(false)));
        assert_eq!(got(1), Ok(Some(false)));
        assert_eq!(got(2), Ok(None));
        let (line, msg) = got(3).unwrap_err();
        assert_eq!(line, 8);
        assert!(msg.contains("only -1"), "{msg}");
    }
}

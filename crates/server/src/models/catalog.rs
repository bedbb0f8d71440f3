//! The catalog: every model the server can load, by the names requests
//! use. Its sources, in order: the model given at start, the presets,
//! the `*.gguf` files of `--models-dir` (a folder of them counts as one
//! model, named by the folder), and the store's models (unless the server
//! serves the one model it was started with). A request may
//! name a model by its id, an alias, the spec it was given by, or
//! Ollama's `NAME:TAG` (`:latest` is the bare name); a known name or an
//! `hf:…` spec the catalog does not list is loadable too (it is pulled).

use std::path::{Path, PathBuf};

use minfer_engine::Store;

use super::preset::{self, Preset};
use crate::config::{ModelConfig, ServerConfig};

/// Where an entry of the catalog comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The model given at start.
    Startup,
    /// A section of the preset file.
    Preset,
    /// A file of `--models-dir`.
    Dir,
    /// The store (a pulled model, or a known name or `hf:…` spec asked for).
    Store,
}

impl Source {
    /// As `/models` reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Startup => "startup",
            Source::Preset => "preset",
            Source::Dir => "models_dir",
            Source::Store => "cache",
        }
    }
}

/// One model the server can load.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The id it is listed by.
    pub id: String,
    /// What the engine loads: a path, a known name or `hf:…`.
    pub spec: String,
    /// Other names requests may use.
    pub aliases: Vec<String>,
    /// What it runs with.
    pub cfg: ModelConfig,
    /// Where it comes from.
    pub source: Source,
    /// Loaded when the server starts.
    pub load_on_startup: bool,
    /// The file's size, when the file is present.
    pub size: Option<u64>,
}

impl Entry {
    fn new(id: String, spec: String, cfg: ModelConfig, source: Source) -> Entry {
        let size = std::fs::metadata(&spec).ok().map(|m| m.len());
        Entry {
            aliases: vec![spec.clone()],
            id,
            spec,
            cfg,
            source,
            load_on_startup: false,
            size,
        }
    }

    /// Whether a request's `name` means this model.
    pub fn answers_to(&self, name: &str) -> bool {
        let bare = name.strip_suffix(":latest").unwrap_or(name);
        [name, bare]
            .iter()
            .any(|n| *n == self.id || self.aliases.iter().any(|a| a == n))
    }
}

/// The models a server can load.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// In listing order.
    pub entries: Vec<Entry>,
}

/// A catalog that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The preset file.
    #[error("--models-preset {0}")]
    Preset(#[from] preset::PresetError),
    /// The models directory.
    #[error("--models-dir {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl Catalog {
    /// Reads the sources `cfg` names (the preset file, the directory) and
    /// the store's list.
    ///
    /// # Errors
    /// [`CatalogError`] for a preset file or directory that cannot be read.
    pub fn scan(cfg: &ServerConfig, store: &Store) -> Result<Catalog, CatalogError> {
        let mut cat = Catalog::default();
        if let Some(spec) = &cfg.model {
            // llama-server keeps its aliases in a sorted set: the first
            // is the id.
            let mut given = given_aliases(&cfg.per_model);
            given.sort();
            let id = given.first().cloned().unwrap_or_else(|| model_id(spec));
            let mut e = Entry::new(id, spec.clone(), cfg.per_model.clone(), Source::Startup);
            e.load_on_startup = true;
            cat.entries.push(e);
        }
        if let Some(dir) = &cfg.models.dir {
            let found = gguf_models(dir).map_err(|source| CatalogError::Dir {
                dir: dir.clone(),
                source,
            })?;
            for (id, path) in found {
                let spec = path.to_string_lossy().into_owned();
                cat.add(Entry::new(id, spec, cfg.per_model.clone(), Source::Dir));
            }
        }
        let listed = match cfg.models.store {
            true => store.list().ok(),
            false => None,
        };
        if let Some(list) = listed {
            for item in list.into_iter().filter(|i| i.present) {
                let spec = item.path.to_string_lossy().into_owned();
                // A file of the store's folder by its name without the
                // extension, as Ollama lists it.
                let id = match item.name.strip_suffix(".gguf") {
                    Some(stem) if !item.name.starts_with("hf:") => stem.to_string(),
                    _ => item.name.clone(),
                };
                let mut e = Entry::new(id, spec, cfg.per_model.clone(), Source::Store);
                e.aliases.push(model_id(&item.name));
                cat.add(e);
            }
        }
        if let Some(path) = &cfg.models.preset {
            for p in preset::read(path)? {
                cat.apply_preset(&p, cfg, path)?;
            }
        }
        for e in &mut cat.entries {
            e.aliases.extend(given_aliases(&e.cfg));
            e.aliases.push(model_id(&e.spec));
            let id = e.id.clone();
            e.aliases.retain(|a| *a != id);
            e.aliases.sort();
            e.aliases.dedup();
        }
        Ok(cat)
    }

    /// Adds `e` unless a model of the same id is listed already, or it is
    /// the file of the model given at start (a second name of a file, an
    /// Ollama copy, is a model of its own).
    fn add(&mut self, e: Entry) {
        let same = |o: &Entry| {
            o.id == e.id || (o.source == Source::Startup && same_file(&o.spec, &e.spec))
        };
        if !self.entries.iter().any(same) {
            self.entries.push(e);
        }
    }

    fn apply_preset(
        &mut self,
        p: &Preset,
        cfg: &ServerConfig,
        file: &Path,
    ) -> Result<(), preset::PresetError> {
        let error = |(line, message)| preset::PresetError {
            file: file.display().to_string(),
            line,
            message,
        };
        let existing = self.entries.iter().position(|e| e.answers_to(&p.name));
        let (model_cfg, ignored) = match existing {
            Some(i) => p.apply(&self.entries[i].cfg),
            None => p.apply(&cfg.per_model),
        }
        .map_err(error)?;
        if !ignored.is_empty() {
            eprintln!(
                "minfer serve: {}: [{}] {} not used by minfer",
                file.display(),
                p.name,
                ignored.join(", ")
            );
        }
        match (existing, &p.model) {
            (Some(i), None) => {
                let e = &mut self.entries[i];
                e.cfg = model_cfg;
                e.load_on_startup |= p.load_on_startup;
            }
            (_, Some(spec)) => {
                let mut e = Entry::new(p.name.clone(), spec.clone(), model_cfg, Source::Preset);
                e.load_on_startup = p.load_on_startup;
                self.entries.retain(|o| o.id != p.name);
                self.entries.push(e);
            }
            (None, None) => {
                return Err(error((
                    0,
                    format!(
                        "[{}] names no model the server lists and has no `model = FILE`",
                        p.name
                    ),
                )))
            }
        }
        Ok(())
    }

    /// The entry a request's `name` means: a listed model, or a known name
    /// or `hf:…` spec the store can pull (with `base`'s settings).
    pub fn find(&self, name: &str, base: &ModelConfig) -> Option<Entry> {
        if let Some(e) = self.entries.iter().find(|e| e.answers_to(name)) {
            return Some(e.clone());
        }
        let bare = name.strip_suffix(":latest").unwrap_or(name);
        match minfer_engine::ModelSpec::parse(bare) {
            Ok(
                minfer_engine::ModelSpec::Known(_) | minfer_engine::ModelSpec::HuggingFace { .. },
            ) => Some(Entry::new(
                bare.to_string(),
                bare.to_string(),
                base.clone(),
                Source::Store,
            )),
            _ => None,
        }
    }
}

/// The names given with `alias` (comma-separated).
fn given_aliases(cfg: &ModelConfig) -> Vec<String> {
    cfg.alias
        .iter()
        .flat_map(|a| a.split(','))
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether two specs are the same existing file.
fn same_file(a: &str, b: &str) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The id a model is served under: a known name as given, a file's stem.
pub fn model_id(spec: &str) -> String {
    let p = Path::new(spec);
    if spec.ends_with(".gguf") {
        if let Some(stem) = p.file_stem() {
            return stem.to_string_lossy().into_owned();
        }
    }
    spec.rsplit('/').next().unwrap_or(spec).to_string()
}

/// The models of a directory, sorted by id: each `*.gguf` file by its
/// stem, each folder with `*.gguf` files in it by the folder's name (its
/// first file in name order that is not a projector, `mmproj*`).
fn gguf_models(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for item in std::fs::read_dir(dir)? {
        let path = item?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name.filter(|n| !n.starts_with('.')) else {
            continue;
        };
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path)?
                .filter_map(|f| f.ok().map(|f| f.path()))
                .filter(|f| is_model_file(f))
                .collect();
            files.sort();
            if let Some(first) = files.into_iter().next() {
                out.push((name, first));
            }
        } else if is_model_file(&path) {
            out.push((model_id(&name), path));
        }
    }
    out.sort();
    Ok(out)
}

fn is_model_file(p: &Path) -> bool {
    let name = p.file_name().map(|n| n.to_string_lossy().to_lowercase());
    name.is_some_and(|n| n.ends_with(".gguf") && !n.starts_with("mmproj"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids() {
        assert_eq!(model_id("smollm2-135m-instruct"), "smollm2-135m-instruct");
        assert_eq!(model_id("/x/y/qwen-q4.gguf"), "qwen-q4");
        assert_eq!(model_id("hf:o/r/f.gguf"), "f");
    }

    #[test]
    fn a_directory_lists_files_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b-q4.gguf"), b"x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let sub = dir.path().join("a-vision");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("mmproj-f16.gguf"), b"x").unwrap();
        std::fs::write(sub.join("model.gguf"), b"x").unwrap();
        let found = gguf_models(dir.path()).unwrap();
        let ids: Vec<&str> = found.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(ids, ["a-vision", "b-q4"]);
        assert!(found[0].1.ends_with("a-vision/model.gguf"));
    }

    #[test]
    fn names_ollama_tags_and_aliases() {
        let mut e = Entry::new(
            "qwen".into(),
            "/m/qwen.gguf".into(),
            crate::testing::model_config(),
            Source::Dir,
        );
        e.aliases.push("coder".into());
        assert!(e.answers_to("qwen") && e.answers_to("qwen:latest"));
        assert!(e.answers_to("coder") && e.answers_to("/m/qwen.gguf"));
        assert!(!e.answers_to("qwen:7b") && !e.answers_to("other"));
    }
}

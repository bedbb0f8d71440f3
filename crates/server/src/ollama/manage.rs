//! Ollama's model management: `POST /api/pull` (from the store's
//! sources, with Ollama's streamed progress), `DELETE /api/delete` and
//! `POST /api/copy`. Models live in the store's directory: a pull puts the
//! file there, a copy links it there under the new name, a delete removes
//! it (a model of `--models-dir` or the one given at start is the user's
//! file, not the store's, and is not deleted).

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use minfer_engine::ModelSpec;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ollama_unknown, OllamaError};
use crate::http::{parse, read_body, ApiError};
use crate::models::Source;
use crate::state::Shared;

type St = State<Arc<Shared>>;

/// How often a pull reports its progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// A model named as Ollama's bodies do (`model`, or the older `name`).
#[derive(Debug, Deserialize)]
struct Named {
    #[serde(default)]
    model: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    stream: Option<bool>,
}

impl Named {
    fn name(&self) -> Result<&str, ApiError> {
        let n = if self.model.is_empty() {
            &self.name
        } else {
            &self.model
        };
        match n.strip_suffix(":latest").unwrap_or(n) {
            "" => Err(ApiError::bad_param("model", "model is required")),
            n => Ok(n),
        }
    }
}

async fn body<T: serde::de::DeserializeOwned>(shared: &Shared, b: Body) -> Result<T, ApiError> {
    parse(&read_body(shared, b).await?)
}

/// Bytes written so far by a pull of `dest`: its `.partial` file, and the
/// wheels of a `.pull-*` folder beside it.
fn pulled_bytes(dest: &Path) -> u64 {
    let mut partial = dest.as_os_str().to_owned();
    partial.push(".partial");
    let mut n = std::fs::metadata(&partial).map_or(0, |m| m.len());
    let dir = dest.parent().unwrap_or(Path::new("."));
    if let Ok(items) = std::fs::read_dir(dir) {
        for item in items.flatten() {
            if item.file_name().to_string_lossy().starts_with(".pull-") {
                n = n.max(dir_bytes(&item.path()));
            }
        }
    }
    n
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |items| {
        items
            .flatten()
            .map(|i| match i.metadata() {
                Ok(m) if m.is_dir() => dir_bytes(&i.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

/// `POST /api/pull`: a known name or `hf:owner/repo/file` into the store,
/// streamed as Ollama streams it (`pulling manifest`, progress lines with
/// `total` and `completed`, `verifying sha256 digest`, `success`; an
/// error as a last `{"error"}` line), or one object with `stream: false`.
pub async fn pull(State(shared): St, b: Body) -> Result<Response, OllamaError> {
    let req: Named = body(&shared, b).await?;
    let name = req.name()?.to_string();
    let spec = ModelSpec::parse(&name)
        .ok()
        .filter(|s| !matches!(s, ModelSpec::Path(_)))
        .ok_or_else(|| {
            ApiError::bad_param(
                "model",
                format!("pull what? `{name}` is neither a known model (`minfer list`) nor hf:owner/repo/file.gguf"),
            )
            .with_status(StatusCode::NOT_FOUND)
        })?;
    let store = shared.models.store().clone();
    let dest = store.local_path(&spec);
    let total = match &spec {
        ModelSpec::Known(m) if m.size > 0 => Some(m.size),
        _ => None,
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let _ = tx.send(json!({"status": "pulling manifest"}));
    let job = tokio::task::spawn_blocking(move || store.pull(&spec));
    let s = shared.clone();
    tokio::spawn(async move {
        let digest = format!("sha256:{}", name.replace(['/', ':'], "-"));
        let mut job = job;
        let outcome = loop {
            tokio::select! {
                r = &mut job => break r,
                _ = tokio::time::sleep(PROGRESS_EVERY) => {
                    let done = pulled_bytes(&dest);
                    let mut line = json!({"status": format!("pulling {name}"), "digest": digest, "completed": done});
                    if let Some(t) = total {
                        line["total"] = json!(t);
                    }
                    let _ = tx.send(line);
                }
            }
        };
        match outcome {
            Ok(Ok(_)) => {
                let _ = tx.send(json!({"status": "verifying sha256 digest"}));
                let _ = s.models.reload(&s.cfg);
                let _ = tx.send(json!({"status": "writing manifest"}));
                let _ = tx.send(json!({"status": "success"}));
            }
            Ok(Err(e)) => {
                let _ = tx.send(json!({"error": e.to_string()}));
            }
            Err(_) => {
                let _ = tx.send(json!({"error": "the pull stopped"}));
            }
        }
    });
    if !req.stream.unwrap_or(true) {
        let mut last = json!({});
        while let Some(v) = rx.recv().await {
            last = v;
        }
        let status = if last.get("error").is_some() {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        };
        return Ok((status, Json(last)).into_response());
    }
    let lines = futures_util::stream::unfold(rx, |mut rx| async move {
        let v = rx.recv().await?;
        Some((Ok::<_, Infallible>(format!("{v}\n")), rx))
    });
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines),
    )
        .into_response())
}

/// The store file of the model `name` means; an error for a model that is
/// not the store's.
fn store_file(shared: &Shared, name: &str) -> Result<PathBuf, ApiError> {
    let entry = shared
        .models
        .resolve_listed(name)
        .ok_or_else(|| ollama_unknown(name))?;
    if entry.source != Source::Store {
        return Err(ApiError::bad_param(
            "model",
            format!(
                "{name} is {}, not a model of the store ({}); minfer deletes only what it pulled",
                entry.spec,
                shared.models.store().models_dir().display()
            ),
        ));
    }
    Ok(PathBuf::from(entry.spec))
}

/// `DELETE /api/delete`: unloads the model and removes its file (and its
/// recorded checksum) from the store.
pub async fn delete(State(shared): St, b: Body) -> Result<Response, OllamaError> {
    let req: Named = body(&shared, b).await?;
    let name = req.name()?;
    let file = store_file(&shared, name)?;
    let _ = shared.models.unload(name);
    std::fs::remove_file(&file)
        .map_err(|e| ApiError::internal(format!("cannot delete {}: {e}", file.display())))?;
    let mut sidecar = file.into_os_string();
    sidecar.push(".sha256");
    let _ = std::fs::remove_file(sidecar);
    shared.models.reload(&shared.cfg)?;
    Ok(StatusCode::OK.into_response())
}

/// `POST /api/copy`'s body.
#[derive(Debug, Deserialize)]
struct Copy {
    source: String,
    destination: String,
}

/// `POST /api/copy`: the model under a second name, as a link to the same
/// file in the store (a copy where links are not possible).
pub async fn copy(State(shared): St, b: Body) -> Result<Response, OllamaError> {
    let req: Copy = body(&shared, b).await?;
    let source = req.source.strip_suffix(":latest").unwrap_or(&req.source);
    let dest = req
        .destination
        .strip_suffix(":latest")
        .unwrap_or(&req.destination);
    let bad_name = dest.is_empty()
        || dest.starts_with('.')
        || dest.contains(['/', '\\'])
        || dest.chars().any(char::is_control);
    if bad_name {
        return Err(ApiError::bad_param(
            "destination",
            "destination must be a plain name (no slashes)",
        )
        .into());
    }
    let entry = shared
        .models
        .resolve_listed(source)
        .ok_or_else(|| ollama_unknown(source))?;
    if shared.models.resolve_listed(dest).is_some() {
        return Err(
            ApiError::bad_param("destination", format!("a model named {dest} exists")).into(),
        );
    }
    let dir = shared.models.store().models_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| ApiError::internal(format!("{}: {e}", dir.display())))?;
    let target = dir.join(format!("{dest}.gguf"));
    // The file itself, not a link to it.
    let from = std::fs::canonicalize(&entry.spec).unwrap_or_else(|_| PathBuf::from(&entry.spec));
    if std::fs::hard_link(&from, &target).is_err() {
        std::fs::copy(&from, &target)
            .map_err(|e| ApiError::internal(format!("cannot copy {}: {e}", entry.spec)))?;
    }
    shared.models.reload(&shared.cfg)?;
    Ok(StatusCode::OK.into_response())
}

//! Loading one model of the catalog: the file, its chat template, its
//! scheduler and draft, and the names it answers to.

use std::sync::Arc;

use minfer_engine::{LoadedModel, Scheduler, Store};

use super::catalog::{model_id, Entry};
use crate::error::ServeError;
use crate::models::Served;
use crate::template;

/// Loads `entry` and starts its scheduler (on the model's own thread).
///
/// # Errors
/// [`ServeError::Engine`] for a file the engine cannot load;
/// [`ServeError::Config`] for a template or draft that does not fit.
pub fn load(store: &Store, entry: &Entry) -> Result<(Served, Scheduler), ServeError> {
    let cfg = &entry.cfg;
    let loaded = LoadedModel::load(store, &entry.spec)?;
    let template = match &cfg.chat_template {
        Some(choice) => Some(choice.load().map_err(ServeError::Config)?),
        None => loaded.template().cloned(),
    };
    if let (Some(choice), Some(t)) = (&cfg.chat_template, &template) {
        template::check(t).map_err(|e| ServeError::Config(format!("{choice}: {e}")))?;
    }
    let abilities = template
        .as_ref()
        .map(|t| template::abilities(t, loaded.tokenizer()))
        .unwrap_or_default();
    let template = template.map(|t| template::with_thinking(t, &abilities, cfg.reasoning));
    let mut sched = loaded.scheduler(cfg.engine)?;
    if let Some((draft, spec)) = &cfg.speculation {
        let draft = match draft {
            Some(name) => {
                let d = LoadedModel::load(store, name)?;
                Some(
                    minfer_engine::DraftModel::new(
                        d.runtime(cfg.engine)?,
                        d.tokenizer(),
                        loaded.tokenizer(),
                        loaded.model().n_vocab(),
                    )
                    .map_err(|e| ServeError::Config(format!("--draft {name}: {e}")))?,
                )
            }
            None => None,
        };
        let spec = minfer_engine::Speculation::new(*spec, draft)
            .map_err(|e| ServeError::Config(e.to_string()))?;
        sched.set_speculation(Some(spec));
    }
    let (id, given) = names(entry);
    let mut aliases = entry.aliases.clone();
    aliases.extend([entry.spec.clone(), loaded.name(), model_id(&entry.spec)]);
    aliases.retain(|a| a != &id);
    aliases.sort();
    aliases.dedup();
    let served = Served {
        loaded: Arc::new(loaded),
        id,
        aliases,
        named: (given, cfg.tags.clone()),
        template,
        abilities,
        cfg: cfg.clone(),
    };
    Ok((served, sched))
}

/// The id a model is served under, and the names given with `alias`
/// (sorted, as llama-server keeps them).
fn names(entry: &Entry) -> (String, Vec<String>) {
    let given: std::collections::BTreeSet<String> = entry
        .cfg
        .alias
        .iter()
        .flat_map(|a| a.split(','))
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    (entry.id.clone(), given.into_iter().collect())
}

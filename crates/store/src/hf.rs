//! Pulling single files from a Hugging Face repo over HTTP.
//!
//! A `resolve` URL answers with a redirect to the storage backend, and that
//! redirect is the only response carrying the file's sha256
//! (`X-Linked-Etag`) and size (`X-Linked-Size`). An HTTP client that
//! follows redirects on its own would hide those headers, so redirects are
//! followed here by hand.
//!
//! The body goes to `<final>.partial`. A broken transfer keeps the partial
//! and the next pull asks only for the missing tail (`Range`); the final
//! name appears only after size, sha256 and GGUF structure have been checked.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use url::Url;

use crate::checksum::{is_sha256_hex, sha256_file};
use crate::partial::{commit, discard, ensure_dir, partial_path};
use crate::progress::Progress;
use crate::{StoreConfig, StoreError};

/// Redirect hops followed before giving up; the hub uses one or two.
const MAX_REDIRECTS: usize = 8;

/// The file a pull is about, for URLs and messages.
pub(crate) struct HfFile<'a> {
    pub owner: &'a str,
    pub repo: &'a str,
    pub file: &'a str,
}

impl HfFile<'_> {
    fn spec(&self) -> String {
        format!("hf:{}/{}/{}", self.owner, self.repo, self.file)
    }
}

/// Downloads `target` to `dest` (which must not exist yet), resuming from
/// `<dest>.partial` when one is there.
pub(crate) fn pull(cfg: &StoreConfig, target: &HfFile<'_>, dest: &Path) -> Result<(), StoreError> {
    let client = Client::new(cfg)?;
    let url = file_url(&cfg.hf_endpoint, target)?;
    let remote = client.locate(&url, target)?;
    if let Some(parent) = dest.parent() {
        ensure_dir(parent)?;
    }
    let partial = partial_path(dest);
    let name = target.spec();
    let total = client.download(&remote, &partial, &name, target)?;
    if let Err(e) = verify(
        &partial,
        total.or(remote.size),
        remote.sha256.as_deref(),
        &name,
    ) {
        discard(&partial);
        return Err(e);
    }
    commit(&partial, dest).inspect_err(|_| discard(&partial))
}

/// `{endpoint}/{owner}/{repo}/resolve/main/{file}`, each path segment
/// percent-encoded, keeping any path prefix the endpoint has (mirrors).
pub(crate) fn file_url(endpoint: &str, target: &HfFile<'_>) -> Result<Url, StoreError> {
    let bad = |reason: &str| StoreError::InvalidEndpoint {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let mut url = Url::parse(endpoint).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    url.set_query(None);
    url.set_fragment(None);
    {
        let mut segments = url
            .path_segments_mut()
            .map_err(|()| bad("it cannot be a base URL"))?;
        segments.pop_if_empty();
        segments.extend([target.owner, target.repo, "resolve", "main"]);
        segments.extend(target.file.split('/'));
    }
    Ok(url)
}

/// Where the bytes are, and what they should be.
struct Remote {
    /// The URL the redirects ended at.
    url: Url,
    /// The hub URL, for messages.
    shown: Url,
    size: Option<u64>,
    sha256: Option<String>,
}

/// A response together with the URL it came from.
struct Reply {
    url: Url,
    resp: ureq::Response,
}

/// Strips quotes and a weak-validator prefix from an ETag.
fn unquote(etag: &str) -> &str {
    let e = etag.trim();
    let e = e.strip_prefix("W/").unwrap_or(e);
    e.trim_matches('"')
}

struct Client {
    agent: ureq::Agent,
    endpoint: Url,
    token: Option<String>,
    progress: bool,
}

impl Client {
    fn new(cfg: &StoreConfig) -> Result<Self, StoreError> {
        let endpoint = Url::parse(&cfg.hf_endpoint).map_err(|e| StoreError::InvalidEndpoint {
            endpoint: cfg.hf_endpoint.clone(),
            reason: e.to_string(),
        })?;
        let agent = ureq::AgentBuilder::new()
            .redirects(0)
            .timeout_connect(Duration::from_secs(30))
            .timeout_read(Duration::from_secs(60))
            .user_agent(concat!("minfer/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Client {
            agent,
            endpoint,
            token: cfg.hf_token.clone(),
            progress: cfg.progress,
        })
    }

    /// Sends one request and follows redirects by hand. `linked` collects
    /// the `X-Linked-*` headers of the hops. Every HTTP status comes back
    /// as a reply; only transport failures are errors.
    fn send(
        &self,
        method: &str,
        url: &Url,
        range_from: Option<u64>,
        linked: &mut Linked,
    ) -> Result<Reply, StoreError> {
        let mut current = url.clone();
        let mut last_status = 0;
        for _ in 0..=MAX_REDIRECTS {
            // Ask for the bytes as stored: a compressed transfer would make
            // lengths and ranges refer to something else than the file.
            let mut req = self
                .agent
                .request_url(method, &current)
                .set("Accept-Encoding", "identity");
            // Redirects lead to storage hosts; the token is for the hub only.
            if let Some(token) = &self.token {
                if current.origin() == self.endpoint.origin() {
                    req = req.set("Authorization", &format!("Bearer {token}"));
                }
            }
            if let Some(from) = range_from {
                req = req.set("Range", &format!("bytes={from}-"));
            }
            let resp = match req.call() {
                Ok(resp) | Err(ureq::Error::Status(_, resp)) => resp,
                Err(ureq::Error::Transport(t)) => {
                    return Err(StoreError::Network {
                        url: without_query(&current),
                        message: t.to_string(),
                    })
                }
            };
            linked.absorb(&resp);
            last_status = resp.status();
            if !(300..400).contains(&last_status) {
                return Ok(Reply { url: current, resp });
            }
            let redirect_error = |detail: String| StoreError::HttpStatus {
                url: without_query(&current),
                status: last_status,
                detail,
            };
            let Some(location) = resp.header("location") else {
                return Err(redirect_error(
                    "redirect without a Location header".to_string(),
                ));
            };
            let next = current
                .join(location)
                .map_err(|e| redirect_error(format!("bad redirect location '{location}': {e}")))?;
            current = next;
        }
        Err(StoreError::HttpStatus {
            url: url.to_string(),
            status: last_status,
            detail: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// HEAD through the redirects: the final URL, the size and the sha256.
    fn locate(&self, url: &Url, target: &HfFile<'_>) -> Result<Remote, StoreError> {
        let mut linked = Linked::default();
        let reply = self.send("HEAD", url, None, &mut linked)?;
        if !(200..300).contains(&reply.resp.status()) {
            return Err(status_error(&reply, url, target));
        }
        let size = linked.size.or_else(|| content_length(&reply.resp));
        let sha256 = linked
            .etag
            .filter(|e| is_sha256_hex(e))
            .map(|e| e.to_ascii_lowercase());
        Ok(Remote {
            url: reply.url,
            shown: url.clone(),
            size,
            sha256,
        })
    }

    /// Brings `partial` up to the whole file. Returns the total size the
    /// server announced, when it did. A transfer that breaks off keeps the
    /// partial and reports [`StoreError::Interrupted`].
    fn download(
        &self,
        remote: &Remote,
        partial: &Path,
        name: &str,
        target: &HfFile<'_>,
    ) -> Result<Option<u64>, StoreError> {
        let mut have = match std::fs::metadata(partial) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(StoreError::io(partial)(e)),
        };
        if remote.size.is_some_and(|size| have > size) {
            // Longer than the file can be: not a prefix of it, start over.
            have = 0;
        }
        let mut linked = Linked::default();
        let (reply, total) = loop {
            let reply = self.send("GET", &remote.url, (have > 0).then_some(have), &mut linked)?;
            match reply.resp.status() {
                200 => {
                    // Whole body: the server ignored or was not sent a range.
                    have = 0;
                    let total = content_length(&reply.resp);
                    break (reply, total);
                }
                206 if have > 0 => match content_range(&reply.resp) {
                    Some((start, total)) if start == have => break (reply, total),
                    // A range other than the one asked for: do not splice
                    // it in; fetch the whole file instead.
                    _ => have = 0,
                },
                // The partial already holds every byte; verification decides.
                416 if have > 0 => return Ok(remote.size),
                _ => return Err(status_error(&reply, &remote.shown, target)),
            }
        };
        let total = remote.size.or(total);

        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(have > 0)
            .truncate(have == 0)
            .open(partial)
            .map_err(StoreError::io(partial))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut progress = Progress::new(self.progress, name, total, have);
        let mut body = reply.resp.into_reader();
        let mut buf = vec![0u8; 256 << 10];
        let broke_off = loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break None,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Some(e.to_string()),
            };
            out.write_all(&buf[..n]).map_err(StoreError::io(partial))?;
            have += n as u64;
            progress.inc(n as u64);
        };
        let file = out
            .into_inner()
            .map_err(|e| StoreError::io(partial)(e.into_error()))?;
        file.sync_all().map_err(StoreError::io(partial))?;
        drop(file);

        // A body that ended "cleanly" but short of the announced size is
        // the same thing as a broken connection: keep what arrived.
        let short = total.is_some_and(|t| have < t);
        if broke_off.is_some() || short {
            return Err(StoreError::Interrupted {
                url: remote.shown.to_string(),
                have,
                total,
                partial: partial.to_path_buf(),
                message: broke_off.unwrap_or_else(|| "the connection closed early".to_string()),
            });
        }
        progress.finish();
        Ok(total)
    }
}

/// `X-Linked-Size` and the etag (`X-Linked-Etag`, else `ETag`) seen along
/// a chain of redirects; the first value seen wins, since the hub's own
/// answer comes first and storage hosts use etags of their own.
#[derive(Default)]
struct Linked {
    size: Option<u64>,
    etag: Option<String>,
    plain_etag: Option<String>,
}

impl Linked {
    fn absorb(&mut self, resp: &ureq::Response) {
        if self.size.is_none() {
            self.size = resp
                .header("x-linked-size")
                .and_then(|v| v.trim().parse().ok());
        }
        if self.etag.is_none() {
            self.etag = resp.header("x-linked-etag").map(|v| unquote(v).to_string());
        }
        if self.plain_etag.is_none() {
            self.plain_etag = resp.header("etag").map(|v| unquote(v).to_string());
        }
        // Without LFS there is no linked etag; the plain one may then be
        // a sha256 (and is ignored later if it is not).
        if self.etag.is_none() && !(300..400).contains(&resp.status()) {
            self.etag = self.plain_etag.clone();
        }
    }
}

/// A URL for messages: signed storage URLs carry their credentials in the
/// query, which is noise at best.
fn without_query(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

fn content_length(resp: &ureq::Response) -> Option<u64> {
    resp.header("content-length")?.trim().parse().ok()
}

/// `Content-Range: bytes START-END/TOTAL` → (START, TOTAL if not `*`).
fn content_range(resp: &ureq::Response) -> Option<(u64, Option<u64>)> {
    parse_content_range(resp.header("content-range")?)
}

fn parse_content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, _end) = range.split_once('-')?;
    let start = start.trim().parse().ok()?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    Some((start, total))
}

/// The error for a response that is not what the request needed.
/// Messages name `shown`, the hub URL the user asked for: the storage URL a
/// redirect leads to is long, temporary and signed.
fn status_error(reply: &Reply, shown: &Url, target: &HfFile<'_>) -> StoreError {
    let url = shown.to_string();
    match reply.resp.status() {
        status @ (401 | 403) => StoreError::AccessDenied { url, status },
        404 => StoreError::RemoteNotFound {
            owner: target.owner.to_string(),
            repo: target.repo.to_string(),
            file: target.file.to_string(),
            url,
        },
        status => StoreError::HttpStatus {
            url,
            status,
            detail: reply
                .resp
                .header("x-error-message")
                .unwrap_or_default()
                .to_string(),
        },
    }
}

/// Checks a finished partial: size, sha256 when known, and GGUF structure.
fn verify(
    partial: &Path,
    size: Option<u64>,
    sha256: Option<&str>,
    name: &str,
) -> Result<(), StoreError> {
    let actual = File::open(partial)
        .and_then(|f| f.metadata())
        .map_err(StoreError::io(partial))?
        .len();
    if let Some(expected) = size {
        if actual != expected {
            return Err(StoreError::SizeMismatch {
                name: name.to_string(),
                expected,
                actual,
            });
        }
    }
    if let Some(expected) = sha256 {
        let actual = sha256_file(partial)?;
        if actual != expected {
            return Err(StoreError::ChecksumMismatch {
                name: name.to_string(),
                expected: expected.to_string(),
                actual,
            });
        }
    }
    minfer_gguf::GgufFile::open(partial)
        .map(drop)
        .map_err(|source| StoreError::NotGguf {
            name: name.to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target<'a>(owner: &'a str, repo: &'a str, file: &'a str) -> HfFile<'a> {
        HfFile { owner, repo, file }
    }

    #[test]
    fn urls_encode_segments_and_keep_prefixes() {
        let t = target("Qwen", "Qwen2.5-0.5B-GGUF", "sub dir/model#1.gguf");
        assert_eq!(
            file_url("https://huggingface.co", &t).unwrap().as_str(),
            "https://huggingface.co/Qwen/Qwen2.5-0.5B-GGUF/resolve/main/sub%20dir/model%231.gguf"
        );
        assert_eq!(
            file_url("http://127.0.0.1:8080/mirror/", &target("a", "b", "c.gguf"))
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8080/mirror/a/b/resolve/main/c.gguf"
        );
        assert!(matches!(
            file_url("not a url", &t),
            Err(StoreError::InvalidEndpoint { .. })
        ));
        assert!(matches!(
            file_url("ftp://x", &t),
            Err(StoreError::InvalidEndpoint { .. })
        ));
    }

    #[test]
    fn content_range_parsing() {
        assert_eq!(
            parse_content_range("bytes 100-199/200"),
            Some((100, Some(200)))
        );
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, None)));
        assert_eq!(parse_content_range("bytes */200"), None);
        assert_eq!(parse_content_range("items 1-2/3"), None);
    }

    #[test]
    fn etags_are_unquoted() {
        assert_eq!(unquote("\"abc\""), "abc");
        assert_eq!(unquote("W/\"abc\""), "abc");
        assert_eq!(unquote(" abc "), "abc");
    }
}

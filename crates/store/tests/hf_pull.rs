//! Pulling `hf:` models from a loopback server that behaves like the hub.

mod support;

use std::path::{Path, PathBuf};

use minfer_store::{ModelSpec, Store, StoreError};
use support::{config, sha256, small_gguf, Server, ServerConfig};

const KEY: &str = "someone/some-repo/sub/model.gguf";
const SPEC: &str = "hf:someone/some-repo/sub/model.gguf";

fn serve(bytes: Vec<u8>, tweak: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut cfg = ServerConfig {
        files: vec![(KEY.to_string(), bytes)],
        ..ServerConfig::default()
    };
    tweak(&mut cfg);
    Server::start(cfg)
}

/// A store in a fresh home that pulls from `server`; the home goes when
/// the returned folder is dropped.
fn fresh_store(server: &Server) -> (tempfile::TempDir, Store) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(config(home.path(), &server.endpoint));
    (home, store)
}

fn spec() -> ModelSpec {
    ModelSpec::parse(SPEC).unwrap()
}

fn partial_of(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    s.into()
}

/// Leaves `bytes` where an interrupted pull of [`spec`] keeps its partial
/// download; returns the final file's path.
fn write_partial(store: &Store, bytes: &[u8]) -> PathBuf {
    let dest = store.local_path(&spec());
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::write(partial_of(&dest), bytes).unwrap();
    dest
}

/// A failed pull leaves neither the final file nor a partial one.
fn assert_nothing_left(dest: &Path) {
    assert!(!dest.exists());
    assert!(!partial_of(dest).exists());
}

#[test]
fn pull_into_empty_home_then_second_pull_is_a_noop() {
    let bytes = small_gguf();
    let server = serve(bytes.clone(), |_| {});
    let (home, store) = fresh_store(&server);

    let pulled = store.pull(&spec()).unwrap();
    assert!(pulled.fetched);
    assert_eq!(
        pulled.path,
        home.path()
            .join("models/hf/someone/some-repo/sub/model.gguf")
    );
    assert_eq!(pulled.path, store.local_path(&spec()));
    assert_eq!(std::fs::read(&pulled.path).unwrap(), bytes);
    assert!(!partial_of(&pulled.path).exists());

    let seen = server.log().len();
    let again = store.pull(&spec()).unwrap();
    assert!(!again.fetched);
    assert_eq!(again.path, pulled.path);
    assert_eq!(server.log().len(), seen, "a present file needs no request");
}

#[test]
fn interrupted_pull_keeps_partial_and_resumes_with_range() {
    const K: usize = 100_000;
    let bytes = small_gguf();
    assert!(bytes.len() > 3 * K);
    let server = serve(bytes.clone(), |c| {
        c.drop_after = Some(K);
        c.redirect_host = Some("127.0.0.1".to_string());
    });
    let (_home, store) = fresh_store(&server);
    let dest = store.local_path(&spec());

    let err = store.pull(&spec()).unwrap_err();
    assert!(matches!(err, StoreError::Interrupted { .. }), "{err}");
    assert!(err.to_string().contains("run the same pull again"), "{err}");
    assert!(!dest.exists(), "no final file after an interrupted pull");
    let partial = partial_of(&dest);
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), K as u64);

    let pulled = store.pull(&spec()).unwrap();
    assert!(pulled.fetched);
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert!(!partial.exists());
    let blob = server.blob_requests();
    let expected = format!("bytes={K}-");
    assert!(
        blob.iter()
            .any(|l| l.method == "GET" && l.range.as_deref() == Some(&expected) && l.status == 206),
        "no resumed range request in {blob:?}"
    );
}

#[test]
fn complete_partial_is_answered_416_and_then_verified() {
    let bytes = small_gguf();
    let server = serve(bytes.clone(), |_| {});
    let (_home, store) = fresh_store(&server);
    let dest = write_partial(&store, &bytes);

    assert!(store.pull(&spec()).unwrap().fetched);
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert!(server.blob_requests().iter().any(|l| l.status == 416));
}

#[test]
fn partial_longer_than_the_file_is_restarted() {
    let bytes = small_gguf();
    let server = serve(bytes.clone(), |_| {});
    let (_home, store) = fresh_store(&server);
    let dest = write_partial(&store, &vec![7u8; bytes.len() + 10]);

    assert!(store.pull(&spec()).unwrap().fetched);
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    let gets: Vec<_> = server
        .blob_requests()
        .into_iter()
        .filter(|l| l.method == "GET")
        .collect();
    assert!(gets.iter().all(|l| l.range.is_none()), "{gets:?}");
}

#[test]
fn wrong_linked_etag_is_a_checksum_mismatch_leaving_nothing() {
    let server = serve(small_gguf(), |c| c.linked_etag = Some("ab".repeat(32)));
    let (_home, store) = fresh_store(&server);
    let dest = store.local_path(&spec());

    let err = store.pull(&spec()).unwrap_err();
    match &err {
        StoreError::ChecksumMismatch {
            expected, actual, ..
        } => {
            assert_eq!(expected, &"ab".repeat(32));
            assert_eq!(actual, &sha256(&small_gguf()));
        }
        other => panic!("expected a checksum mismatch, got {other}"),
    }
    assert_nothing_left(&dest);
}

#[test]
fn bytes_that_are_not_gguf_are_rejected() {
    let junk: Vec<u8> = b"<html>this is not a model</html>".repeat(4000);
    let server = serve(junk, |_| {});
    let (_home, store) = fresh_store(&server);
    let dest = store.local_path(&spec());

    let err = store.pull(&spec()).unwrap_err();
    assert!(matches!(err, StoreError::NotGguf { .. }), "{err}");
    assert!(err.to_string().contains("not a valid GGUF"), "{err}");
    assert_nothing_left(&dest);
}

#[test]
fn announced_size_larger_than_the_body_never_yields_a_final_file() {
    let bytes = small_gguf();
    let server = serve(bytes.clone(), |c| {
        c.linked_size = Some(bytes.len() as u64 + 100)
    });
    let (_home, store) = fresh_store(&server);
    let dest = store.local_path(&spec());

    // The body ends short of the announced size: kept for a resume...
    let err = store.pull(&spec()).unwrap_err();
    assert!(matches!(err, StoreError::Interrupted { .. }), "{err}");
    assert!(!dest.exists());
    // ...which finds nothing more to fetch, so the size check rejects it.
    let err = store.pull(&spec()).unwrap_err();
    assert!(matches!(err, StoreError::SizeMismatch { .. }), "{err}");
    assert_nothing_left(&dest);
}

#[test]
fn missing_file_is_a_clear_404_error() {
    let server = serve(small_gguf(), |_| {});
    let (_home, store) = fresh_store(&server);
    let spec = ModelSpec::parse("hf:someone/some-repo/nope.gguf").unwrap();

    let err = store.pull(&spec).unwrap_err();
    assert!(matches!(err, StoreError::RemoteNotFound { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("nope.gguf does not exist in someone/some-repo"),
        "{msg}"
    );
    assert!(!store.local_path(&spec).exists());
}

#[test]
fn refused_access_mentions_hf_token() {
    for status in [401, 403] {
        let server = serve(small_gguf(), |c| c.resolve_status = Some(status));
        let (_home, store) = fresh_store(&server);
        let err = store.pull(&spec()).unwrap_err();
        assert!(matches!(err, StoreError::AccessDenied { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("gated") && msg.contains("HF_TOKEN"), "{msg}");
    }
}

#[test]
fn token_goes_to_the_hub_but_not_to_the_storage_host() {
    let server = serve(small_gguf(), |c| {
        c.redirect_host = Some("localhost".to_string())
    });
    let home = tempfile::tempdir().unwrap();
    let mut cfg = config(home.path(), &server.endpoint);
    cfg.hf_token = Some("hf_test_token".to_string());
    Store::new(cfg).pull(&spec()).unwrap();

    let log = server.log();
    let resolve: Vec<_> = log
        .iter()
        .filter(|l| l.path.contains("/resolve/"))
        .collect();
    assert!(!resolve.is_empty());
    for l in resolve {
        assert_eq!(l.authorization.as_deref(), Some("Bearer hf_test_token"));
    }
    for l in server.blob_requests() {
        assert_eq!(l.authorization, None, "token leaked to {}", l.path);
    }
}

#[test]
fn resolve_pulls_a_missing_hf_model_once() {
    let bytes = small_gguf();
    let server = serve(bytes.clone(), |_| {});
    let (_home, store) = fresh_store(&server);

    let path = store.resolve(SPEC).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let seen = server.log().len();
    assert_eq!(store.resolve(SPEC).unwrap(), path);
    assert_eq!(server.log().len(), seen);

    let listed = store.list().unwrap();
    let entry = listed.iter().find(|e| e.name == SPEC).expect("listed");
    assert_eq!(entry.size, Some(bytes.len() as u64));
    assert!(entry.present);
}

#[test]
fn unreachable_endpoint_is_a_network_error() {
    // Bind and drop a listener to get a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(config(home.path(), &format!("http://127.0.0.1:{port}")));
    let err = store.pull(&spec()).unwrap_err();
    assert!(matches!(err, StoreError::Network { .. }), "{err}");
}

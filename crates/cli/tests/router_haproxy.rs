//! Replicas of `minfer serve` behind an existing router: three SmolLM2
//! replicas and HAProxy (deploy/haproxy/haproxy.cfg, its ports filled in)
//! on loopback, driven by crates/cli/tests/router/router_test.py with the
//! official `openai` client: the chat trace (tests/fixtures/chat-trace.jsonl)
//! replayed under prefix hashing and round robin, one replica SIGKILLed
//! mid-run, another drained with SIGTERM. The script prints the tables;
//! this side checks that the drained replica exits 0.
//!
//! It needs `haproxy` on the PATH (Debian's package; `scripts/test.sh`
//! installs it) and the Python named by MINFER_TEST_PYTHON. Without them
//! the test fails, unless MINFER_REQUIRE_MODELS=0 turns that into a
//! recorded skip.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{wait_for, Server};

fn python() -> Option<PathBuf> {
    match std::env::var_os("MINFER_TEST_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            minfer_testutil::skip(
                "MINFER_TEST_PYTHON (a Python with the openai client)",
                "scripts/test.sh creates it in target/pyenv with the pinned versions",
            );
            None
        }
    }
}

fn haproxy() -> Option<(PathBuf, String)> {
    for cand in ["haproxy", "/usr/sbin/haproxy"] {
        if let Ok(out) = Command::new(cand).arg("-v").output() {
            if out.status.success() {
                let v = String::from_utf8_lossy(&out.stdout);
                let first = v.lines().next().unwrap_or("").to_string();
                return Some((PathBuf::from(cand), first));
            }
        }
    }
    minfer_testutil::skip(
        "haproxy (the router in front of the replicas)",
        "apt-get install haproxy (scripts/test.sh does it when run as root)",
    );
    None
}

/// `minfer serve` with one compute thread (three share two cores).
fn replica(model: &Path, home: &Path) -> Server {
    Server::start_on(
        model,
        home,
        1,
        &["-np", "4", "--n-ctx", "4096", "--drain-timeout", "30"],
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// HAProxy in the foreground, stopped when the test ends.
struct Router(Child);

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn haproxy_in_front_of_three_replicas() {
    let Some(model) = minfer_testutil::require_model(minfer_testutil::SMOLLM) else {
        return;
    };
    let Some(python) = python() else {
        return;
    };
    let Some((haproxy, version)) = haproxy() else {
        return;
    };
    // This crate's own checkout (two levels up), where the template, the
    // script and the trace are.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let home = tempfile::tempdir().unwrap();
    let mut replicas: Vec<Server> = (0..3).map(|_| replica(&model, home.path())).collect();
    let ports = Ports {
        prefix: free_port(),
        rr: free_port(),
        stats: free_port(),
    };
    let cfg_path = write_config(&root, home.path(), &haproxy, &replicas, &ports);
    let _router = start_router(&haproxy, &cfg_path, ports.prefix);
    let names = ["r1", "r2", "r3"];
    let summary = run_script(
        &python,
        &root,
        home.path(),
        &version,
        &replicas,
        &names,
        &ports,
    );
    check_replicas_ended(&mut replicas, &names, &summary);
}

/// The router's listening ports: prefix-affinity, round-robin, stats.
struct Ports {
    prefix: u16,
    rr: u16,
    stats: u16,
}

/// The template's configuration for `replicas` on `ports`, written in
/// `home` and checked by `haproxy -c`; returns its path.
fn write_config(
    root: &Path,
    home: &Path,
    haproxy: &Path,
    replicas: &[Server],
    ports: &Ports,
) -> PathBuf {
    let port = |s: &Server| s.addr.rsplit(':').next().unwrap().to_string();
    let (prefix, rr, stats) = (ports.prefix, ports.rr, ports.stats);
    let template = std::fs::read_to_string(root.join("deploy/haproxy/haproxy.cfg")).unwrap();
    let cfg = template
        .replace("@PREFIX_PORT@", &prefix.to_string())
        .replace("@RR_PORT@", &rr.to_string())
        .replace("@STATS_PORT@", &stats.to_string())
        .replace("@PORT1@", &port(&replicas[0]))
        .replace("@PORT2@", &port(&replicas[1]))
        .replace("@PORT3@", &port(&replicas[2]));
    assert!(!cfg.contains("PORT"), "a placeholder is left: {cfg}");
    let cfg_path = home.join("haproxy.cfg");
    std::fs::write(&cfg_path, &cfg).unwrap();
    let check = Command::new(haproxy)
        .arg("-c")
        .arg("-f")
        .arg(&cfg_path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "haproxy -c: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    cfg_path
}

/// HAProxy on `cfg_path`, once it listens on `prefix` and its first
/// health checks have had time to pass.
fn start_router(haproxy: &Path, cfg_path: &Path, prefix: u16) -> Router {
    let router = Router(
        Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(cfg_path)
            .stdin(Stdio::null())
            .spawn()
            .expect("start haproxy"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", prefix)).is_err() {
        assert!(Instant::now() < deadline, "haproxy did not start listening");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the first health checks pass (rise 2 at inter 250ms).
    std::thread::sleep(Duration::from_millis(800));
    router
}

/// Runs router_test.py through the router; it must pass and write its
/// summary, which is returned.
fn run_script(
    python: &Path,
    root: &Path,
    home: &Path,
    version: &str,
    replicas: &[Server],
    names: &[&str; 3],
    ports: &Ports,
) -> serde_json::Value {
    let (prefix, rr, stats) = (ports.prefix, ports.rr, ports.stats);
    let map: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .zip(replicas)
        .map(|(n, s)| {
            (
                n.to_string(),
                serde_json::json!({"url": s.url(), "pid": s.child.id()}),
            )
        })
        .collect();
    let summary_path = home.join("router-summary.json");
    let mut script = Command::new(python)
        .arg(root.join("crates/cli/tests/router/router_test.py"))
        .env("MINFER_PREFIX_URL", format!("http://127.0.0.1:{prefix}"))
        .env("MINFER_RR_URL", format!("http://127.0.0.1:{rr}"))
        .env(
            "MINFER_STATS_URL",
            format!("http://127.0.0.1:{stats}/stats"),
        )
        .env(
            "MINFER_REPLICAS",
            serde_json::Value::Object(map).to_string(),
        )
        .env("MINFER_MODEL_ID", &replicas[0].model)
        .env("MINFER_TRACE", root.join("tests/fixtures/chat-trace.jsonl"))
        .env("MINFER_ROUTER_SUMMARY", &summary_path)
        .env("MINFER_HAPROXY_VERSION", version)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .spawn()
        .expect("run router_test.py");
    let status = match wait_for(&mut script, Duration::from_secs(420)) {
        Some(s) => s,
        None => {
            let _ = script.kill();
            panic!("router_test.py ran past 7 minutes");
        }
    };
    eprintln!("{version}");
    let summary: serde_json::Value = match std::fs::read_to_string(&summary_path) {
        Ok(s) => serde_json::from_str(&s).unwrap(),
        Err(e) => panic!("router_test.py wrote no summary ({e}); exit {status}"),
    };
    eprintln!(
        "router summary: {}",
        serde_json::to_string_pretty(&summary).unwrap()
    );
    assert!(status.success(), "router_test.py failed: {status}");
    summary
}

/// The replica the script killed is gone, the one it drained exits 0,
/// and the last one stops cleanly.
fn check_replicas_ended(replicas: &mut [Server], names: &[&str; 3], summary: &serde_json::Value) {
    let index = |key: &str, field: &str| -> usize {
        let name = summary[key][field].as_str().unwrap();
        names.iter().position(|n| *n == name).unwrap()
    };
    let killed = index("failover", "killed");
    let drained = index("drain", "replica");
    assert_ne!(killed, drained);
    let st = wait_for(&mut replicas[killed].child, Duration::from_secs(10))
        .expect("the SIGKILLed replica is gone");
    assert!(!st.success(), "{st}");
    let st = wait_for(&mut replicas[drained].child, Duration::from_secs(40))
        .expect("the drained replica exits");
    assert!(
        st.success(),
        "minfer serve exits 0 after SIGTERM and its drain: {st}"
    );
    let last = (0..3).find(|&i| i != killed && i != drained).unwrap();
    let st = replicas[last].terminate(Duration::from_secs(30));
    assert!(st.success(), "{st}");
}

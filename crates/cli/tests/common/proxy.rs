//! What the live client tests share: free loopback ports, children stopped
//! with the test, and `scripts/agents/record_proxy.py` between a client and
//! the server, with its recording read back.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::server::wait_for;

/// A free loopback port (released for a child to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits (at most `limit`) until something listens on `port`.
pub fn wait_listening(port: u16, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child stopped with SIGTERM (then killed) when the test lets go of it.
pub struct Stopped(pub Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        if wait_for(&mut self.0, Duration::from_secs(10)).is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The recording proxy in front of `upstream`, keeping whole responses in
/// `out`; SIGTERM on drop writes the records still in flight.
pub struct Proxy {
    _child: Stopped,
    /// Its base URL.
    pub url: String,
}

impl Proxy {
    pub fn start(upstream: &str, out: &Path) -> Proxy {
        let port = free_port();
        let script = minfer_testutil::workspace_root().join("scripts/agents/record_proxy.py");
        let child = Command::new("python3")
            .arg(script)
            .args(["--port", &port.to_string(), "--upstream", upstream])
            .arg("--out")
            .arg(out)
            .args(["--head-limit", "0", "--timeout", "1200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start scripts/agents/record_proxy.py");
        let child = Stopped(child);
        wait_listening(port, Duration::from_secs(20), "the proxy");
        Proxy {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// The records of a proxy's file (none when it is missing).
pub fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

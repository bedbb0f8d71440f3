//! A `minfer serve` started on a free loopback port for a test, and raw
//! HTTP/1.1 requests to it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `minfer serve`, killed if the test ends before it exits.
pub struct Server {
    pub child: Child,
    /// `host:port`.
    pub addr: String,
    /// The model id the server answers to.
    pub model: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `minfer serve MODEL --port 0 -t 2 ARGS` and waits (at most
    /// two minutes) for its ready line.
    pub fn start(model: &Path, home: &Path, args: &[&str]) -> Server {
        Self::start_on(model, home, 2, args)
    }

    /// [`Server::start`] with `threads` compute threads (and the CPU's own
    /// SIMD level, whatever `MINFER_SIMD` says).
    pub fn start_on(model: &Path, home: &Path, threads: usize, args: &[&str]) -> Server {
        Self::start_with(model, home, threads, args, Stdio::inherit())
    }

    /// [`Server::start_on`] with the server's log (stderr) going to
    /// `stderr`.
    pub fn start_with(
        model: &Path,
        home: &Path,
        threads: usize,
        args: &[&str],
        stderr: Stdio,
    ) -> Server {
        Self::spawn(Some(model), home, threads, args, stderr)
    }

    /// `minfer serve --port 0 -t 2 ARGS` with no model, and the
    /// environment variables `envs`: every model loads when a request
    /// names it (ARGS name where they come from). Its `model` is empty.
    #[allow(dead_code)]
    pub fn start_models(home: &Path, args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::spawn_env(None, home, (2, args), Stdio::inherit(), envs)
    }

    fn spawn(
        model: Option<&Path>,
        home: &Path,
        threads: usize,
        args: &[&str],
        stderr: Stdio,
    ) -> Server {
        Self::spawn_env(model, home, (threads, args), stderr, &[])
    }

    fn spawn_env(
        model: Option<&Path>,
        home: &Path,
        (threads, args): (usize, &[&str]),
        stderr: Stdio,
        envs: &[(&str, &str)],
    ) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_minfer"))
            .envs(envs.iter().copied())
            .arg("serve")
            .args(model)
            .args(["--host", "127.0.0.1", "--port", "0", "-t"])
            .arg(threads.to_string())
            .args(args)
            .env("MINFER_HOME", home)
            .env("MINFER_PYTHON", "/nonexistent/python-for-minfer-tests")
            .env_remove("MINFER_API_KEY")
            .env_remove("MINFER_SIMD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn minfer serve");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("minfer serve prints its ready line within 2 minutes");
        // "minfer serve: listening on http://127.0.0.1:PORT with model ID"
        let rest = line
            .split("http://")
            .nth(1)
            .unwrap_or_else(|| panic!("unexpected ready line {line:?}"));
        let mut words = rest.split_whitespace();
        let addr = words.next().expect("an address").to_string();
        let model = match model {
            Some(_) => words.last().expect("a model id").to_string(),
            None => String::new(),
        };
        Server { child, addr, model }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGTERM, then the exit status within `limit`.
    pub fn terminate(&mut self, limit: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(ok.success());
        wait_for(&mut self.child, limit).expect("minfer serve exits after SIGTERM")
    }
}

pub fn wait_for(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().expect("wait") {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Sends one HTTP/1.1 request and returns the connection, to be read.
pub fn send(addr: &str, method: &str, path: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

/// One request over a fresh connection, read to its end: (status, body).
pub fn exchange(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = send(addr, method, path, body);
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut s, &mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

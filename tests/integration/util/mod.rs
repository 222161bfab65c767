//! Fixtures: a real `kplane` server on a free port with a temp data dir, an HTTP client,
//! a kubectl wrapper, and wait-until helpers.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod metrics;

/// Whether a process whose command line is `command` runs on this machine.
pub fn process_running(command: &str) -> bool {
    let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    pids.filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok()).any(|cmdline| {
        cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .eq(command.split(' ').map(str::as_bytes))
    })
}

/// Polls `condition` until it holds or `timeout` passes; panics with `what` on timeout.
pub fn wait_until(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The Python of the tests' venv (`scripts/setup.sh test` makes it), or `KPLANE_PYTHON`.
pub fn python() -> PathBuf {
    let python = std::env::var_os("KPLANE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup.sh test (make test does)",
        python.display()
    );
    python
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `THP_enabled` of a process, from `/proc/<pid>/status`: false once transparent huge pages
/// were turned off for it (prctl PR_SET_THP_DISABLE).
pub fn huge_pages_enabled(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("THP_enabled:")).expect("THP_enabled");
    line.split_whitespace().nth(1) == Some("1")
}

/// A running `kplane server`, killed when dropped.
pub struct Server {
    pub port: u16,
    pub data: tempfile::TempDir,
    env: Vec<(String, String)>,
    child: Option<Child>,
    pub http: reqwest::blocking::Client,
}

impl Server {
    pub fn start() -> Self {
        Self::start_with_env(&[])
    }

    /// Starts with extra `KPLANE_*` settings.
    pub fn start_with_env(env: &[(&str, &str)]) -> Self {
        let mut server = Server {
            port: free_port(),
            data: tempfile::tempdir().unwrap(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            child: None,
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        };
        server.spawn();
        server
    }

    pub fn command() -> Command {
        Command::new(env!("CARGO_BIN_EXE_kplane"))
    }

    /// Starts the server and waits until it serves. A port picked free can be taken before the
    /// server binds it (the server then exits with code 2): it is started again on another.
    fn spawn(&mut self) {
        for _ in 0..3 {
            let (url, http) = (self.url("/readyz"), self.http.clone());
            // Kept in `self` from the start, so that a failed wait still kills it on drop.
            let process = self.start_process();
            let child = self.child.insert(process);
            let mut exited = None;
            // Short probes: whatever took the port may accept and never answer.
            let ready = || {
                let probe = http.get(&url).timeout(Duration::from_secs(1)).send();
                probe.is_ok_and(|r| r.status().is_success())
            };
            wait_until(Duration::from_secs(30), "the server is ready", || {
                exited = child.try_wait().expect("the server's status");
                exited.is_some() || ready()
            });
            if exited.is_none() {
                // The system namespaces are created right after the listener binds.
                wait_until(Duration::from_secs(10), "the default namespace exists", || {
                    self.get("/api/v1/namespaces/default").0 == 200
                });
                // An answer from another server on a taken port: ours has exited by now.
                let child = self.child.as_mut().expect("started above");
                exited = child.try_wait().expect("the server's status");
            }
            match exited {
                Some(status) if status.code() == Some(2) => {
                    self.child = None;
                    self.port = free_port();
                }
                Some(status) => panic!("the server exited at start-up: {status}"),
                None => return,
            }
        }
        panic!("the server exited with code 2 three times (its port taken, or its config refused)");
    }

    fn start_process(&self) -> Child {
        let mut cmd = Self::command();
        cmd.args(["server", "--insecure-port", &self.port.to_string(), "--data-dir"])
            .arg(self.data.path())
            .env("RUST_LOG", "warn")
            // Tests of the API alone run without the node agent and the scheduler; those that
            // need them turn them on. An enabled agent picks a free port.
            .env("KPLANE_AGENT__ENABLED", "false")
            .env("KPLANE_SCHEDULER__ENABLED", "false")
            // The secure port only where a test asks for one (6443 would clash between tests).
            .env("KPLANE_SERVER__SECURE_PORT", "0")
            .env("KPLANE_AGENT__PORT", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start kplane")
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// SIGTERM, as an operator would, then wait for the exit (the embedded agent stops its
    /// containers first).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child);
        }
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn base(&self) -> String {
        self.url("")
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        reply(self.http.get(self.url(path)).send())
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        reply(self.http.post(self.url(path)).json(body).send())
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        reply(self.http.put(self.url(path)).json(body).send())
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        reply(self.http.delete(self.url(path)).send())
    }

    /// Sends raw bytes with a content type (None: no Content-Type header).
    pub fn send_raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method.parse().unwrap(), self.url(path)).body(body);
        if let Some(ct) = content_type {
            req = req.header("Content-Type", ct);
        }
        reply(req.send())
    }

    /// A GET with these headers: the status, the Content-Type and the body as text.
    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
        let mut req = self.http.get(self.url(path));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let response = req.send().unwrap();
        let content_type =
            response.headers().get("content-type").map_or("", |t| t.to_str().unwrap());
        (response.status().as_u16(), content_type.to_string(), response.text().unwrap())
    }

    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.base())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Graceful, so that an embedded agent stops the processes it started.
        self.stop();
    }
}

/// SIGTERM, wait up to 20 s, then SIGKILL.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn reply(result: reqwest::Result<reqwest::blocking::Response>) -> (u16, Value) {
    let response = result.expect("request sent");
    let code = response.status().as_u16();
    let text = response.text().unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (code, value)
}

pub fn pod(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "kplane/pause"}]}
    })
}

/// kubectl against one server, with its own kubeconfig and discovery cache.
pub struct Kubectl {
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(server: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: {server}\n\
             contexts:\n- name: k\n  context:\n    cluster: k\n    user: u\n    namespace: default\n\
             current-context: k\nusers:\n- name: u\n  user: {{}}\n"
        );
        std::fs::write(dir.path().join("config"), config).unwrap();
        Kubectl { dir }
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(self.dir.path().join("config"));
        cmd.arg("--cache-dir").arg(self.dir.path().join("cache"));
        cmd.env("HOME", self.dir.path());
        cmd
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out: Output = self.command().args(args).output().expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl and panics with its output if it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args);
        assert!(ok, "kubectl {args:?} failed:\n{stdout}\n{stderr}");
        stdout
    }

    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

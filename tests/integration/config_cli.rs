//! Start-up: failures exit with code 2 and one line naming the key or the port; process-wide
//! settings take effect.

use std::net::TcpListener;
use std::time::Duration;

use crate::util::{self, huge_pages_enabled, Server};

fn run_server(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let data = tempfile::tempdir().unwrap();
    let mut cmd = Server::command();
    cmd.arg("server").args(args).arg("--data-dir").arg(data.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_config_and_busy_port_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[store]\nshardz = 3\n").unwrap();
    let (code, err) = run_server(&["--config", file.to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("shardz") && err.trim().lines().count() == 1, "{err}");

    let (code, err) = run_server(&["--insecure-port", "0"], &[("KPLANE_WATCH__BUFFER", "zero")]);
    assert_eq!(code, 2);
    assert!(err.contains("buffer") && err.trim().lines().count() == 1, "{err}");

    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let (code, err) = run_server(&["--insecure-port", &port], &[("RUST_LOG", "off")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&port) && err.trim().lines().count() == 1, "{err}");

    // The embedded agent's port too (a kubelet's 10250 is often taken), before anything runs
    // or logs.
    let agent = [("KPLANE_AGENT__ENABLED", "true"), ("KPLANE_AGENT__PORT", port.as_str())];
    let (code, err) = run_server(&["--insecure-port", "0", "--secure-port", "0"], &agent);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("agent.port") && err.trim().lines().count() == 1, "{err}");
}

/// A data dir that cannot be written is named as such (not as the certificate made in it).
#[test]
fn a_data_dir_that_cannot_be_written_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let out = Server::command()
        .args(["server", "--insecure-port", "0", "--data-dir"])
        .arg(&file)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("data_dir (--data-dir)") && err.contains("a-file"), "{err}");
    assert!(!err.contains("TLS") && err.trim().lines().count() == 1, "{err}");
}

#[test]
fn the_documented_config_file_is_accepted() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/kplane.toml");
    // A busy port makes the server stop right after the configuration was accepted: the only
    // complaint must be about the port, never about a key of the documented file.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let (code, err) =
        run_server(&["--config", path, "--insecure-port", &port], &[("RUST_LOG", "off")]);
    assert_eq!(code, 2);
    assert!(err.contains(&port) && !err.contains("config"), "{err}");
}

#[test]
fn transparent_huge_pages_are_off_unless_configured_on() {
    let server = Server::start();
    assert!(!huge_pages_enabled(server.pid()), "off by default");
    let server = Server::start_with_env(&[("KPLANE_DISABLE_TRANSPARENT_HUGE_PAGES", "false")]);
    assert_eq!(
        huge_pages_enabled(server.pid()),
        huge_pages_enabled(std::process::id()),
        "left as inherited when the key is false"
    );
}

#[test]
fn the_server_names_its_actors_threads() {
    let server = Server::start();
    let names = || -> Vec<String> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", server.pid())).unwrap();
        let comm = |task: std::fs::DirEntry| std::fs::read_to_string(task.path().join("comm"));
        tasks.filter_map(|t| comm(t.ok()?).ok()).map(|n| n.trim_end().to_string()).collect()
    };
    // The default configuration: two store shards, each with its writer.
    let expected = ["kplane-shard-0", "kplane-shard-1", "kplane-writer-0", "kplane-writer-1"];
    let expected = [&expected[..], &["kplane-hub", "kplane-http", "kplane-svc-lb"]].concat();
    let named = || {
        let names = names();
        expected.iter().all(|e| names.iter().any(|n| n == e))
    };
    util::wait_until(Duration::from_secs(10), "the actors' threads are named", named);
}

/// A server command on a free insecure port, no secure port and no agent, with its data
/// directory (kept while the test runs) and the port.
fn agentless_server() -> (tempfile::TempDir, String, std::process::Command) {
    let data = tempfile::tempdir().unwrap();
    let port = util::free_port().to_string();
    let mut cmd = Server::command();
    cmd.args(["server", "--insecure-port", &port, "--secure-port", "0", "--data-dir"])
        .arg(data.path())
        .env("KPLANE_AGENT__ENABLED", "false");
    (data, port, cmd)
}

/// The soft limit on open files is raised to the hard one (as Go programs raise theirs).
#[test]
fn the_open_file_limit_is_raised_to_the_hard_one() {
    use nix::sys::resource::{getrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(hard > 256, "a hard limit above the test's soft one ({hard})");
    let data = tempfile::tempdir().unwrap();
    let port = util::free_port().to_string();
    // Started with a soft limit of 256 (the hard one kept).
    let mut child = std::process::Command::new("sh")
        .args(["-c", "ulimit -Sn 256 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_kplane")])
        .args(["server", "--insecure-port", &port, "--secure-port", "0", "--data-dir"])
        .arg(data.path())
        .env("KPLANE_AGENT__ENABLED", "false")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/readyz");
    util::wait_until(Duration::from_secs(30), "the server answers", || {
        reqwest::blocking::get(&url).is_ok_and(|r| r.status() == 200)
    });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let open_files = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let numbers: Vec<&str> = open_files.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, [hard.to_string(), hard.to_string()], "{open_files}");
}

#[test]
fn a_log_that_cannot_be_written_stops_nothing() {
    // stderr a pipe whose reader has gone: every log line the server writes fails (EPIPE).
    let (_data, port, mut cmd) = agentless_server();
    cmd.env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stderr.take());
    let http = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/namespaces/default/configmaps");
    let mut created = 0;
    util::wait_until(Duration::from_secs(30), "writes are served while logging fails", || {
        assert!(child.try_wait().unwrap().is_none(), "the server exited");
        let body = serde_json::json!({"metadata": {"generateName": "c-"}});
        let sent = http.post(&url).json(&body).timeout(Duration::from_secs(2)).send();
        created += usize::from(sent.is_ok_and(|r| r.status() == 201));
        created == 20
    });
    assert!(child.try_wait().unwrap().is_none(), "the server exited");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `--audit-log-path -` writes the audit log to the standard output, as kube-apiserver's.
#[test]
fn an_audit_log_of_dash_is_the_standard_output() {
    use std::io::BufRead;
    let (data, port, mut cmd) = agentless_server();
    cmd.args(["--audit-log-path", "-"])
        .current_dir(data.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let http = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/namespaces/default");
    util::wait_until(Duration::from_secs(30), "the server answers", || {
        http.get(&url).header("Audit-ID", "to-stdout").send().is_ok_and(|r| r.status() == 200)
    });
    let mut logged = false;
    for line in lines {
        let event: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["auditID"] == "to-stdout" {
            assert_eq!(event["objectRef"]["resource"], "namespaces", "{event}");
            logged = true;
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(logged, "the request's event is on the standard output");
    assert!(!data.path().join("-").exists(), "no file named -");
}

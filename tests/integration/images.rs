//! The built-in images and the exec-limited launcher as the node agent runs them: real
//! `kplane image ...` processes bound to their pod's 127.x address.

use std::process::{Child, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;

use crate::util::{free_port, wait_until, Server};

const START: Duration = Duration::from_secs(30);

/// A running image process, killed by its PID and reaped when dropped.
struct Image {
    child: Child,
}

impl Image {
    /// Starts `kplane <args>` as the pod `name` with address `pod_ip`.
    fn start(args: &[&str], pod_ip: &str, name: &str) -> Self {
        let child = Server::command()
            .args(args)
            .env("POD_IP", pod_ip)
            .env("HOSTNAME", name)
            .env_remove("POD_NAME")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kplane image");
        Image { child }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits in i32"));
        kill(pid, signal).expect("signal the image");
    }

    /// Waits for the process to exit and returns its status.
    fn exited(&mut self) -> ExitStatus {
        let mut status = None;
        wait_until(Duration::from_secs(20), "the image exits", || {
            status = self.child.try_wait().expect("poll the image");
            status.is_some()
        });
        status.expect("exited")
    }

    /// True once the process handles SIGTERM and SIGINT (`SigCgt` in /proc), so neither kills it.
    fn catches_stop_signals(&self) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()));
        let caught = status.ok().and_then(|s| {
            let hex = s.lines().find_map(|line| line.strip_prefix("SigCgt:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        });
        let bit = |signal: Signal| 1u64 << (signal as i32 - 1);
        let wanted = bit(Signal::SIGTERM) | bit(Signal::SIGINT);
        caught.is_some_and(|caught| caught & wanted == wanted)
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET `url`: status and body, or None if nothing answered.
fn get(url: &str) -> Option<(u16, String)> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .expect("http client");
    let response = client.get(url).send().ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().ok()?))
}

fn answered(status: u16, body: &str) -> Option<(u16, String)> {
    Some((status, body.to_owned()))
}

#[test]
fn netexec_serves_agnhost_endpoints_and_exits_on_request() {
    let port = free_port();
    let mut netexec = Image::start(
        &["image", "agnhost", "netexec", &format!("--http-port={port}")],
        "127.0.0.1",
        "mypod",
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_until(START, "netexec answers", || get(&format!("{base}/healthz")).is_some());

    assert_eq!(get(&format!("{base}/echo?msg=hi")), answered(200, "hi"));
    assert_eq!(get(&format!("{base}/hostname")), answered(200, "mypod"));
    let (status, client) = get(&format!("{base}/clientip")).unwrap();
    assert!(status == 200 && client.starts_with("127.0.0.1:"), "{status} {client}");
    assert_eq!(get(&format!("{base}/shell?cmd=id")).map(|(status, _)| status), Some(403));

    let _ = get(&format!("{base}/exit?code=3"));
    assert_eq!(netexec.exited().code(), Some(3));
}

#[test]
fn serve_hostname_pods_share_a_port_on_their_own_addresses_and_stop_on_sigterm() {
    let port = free_port().to_string();
    let args = ["image", "agnhost", "serve-hostname", "--port", &port];
    let mut first = Image::start(&args, "127.0.0.2", "mypod");
    let second = Image::start(&args, "127.0.0.3", "otherpod");
    for (ip, name) in [("127.0.0.2", "mypod"), ("127.0.0.3", "otherpod")] {
        let url = format!("http://{ip}:{port}/anything");
        wait_until(START, "serve-hostname answers", || get(&url).is_some());
        assert_eq!(get(&url), answered(200, name));
    }

    first.signal(Signal::SIGTERM);
    assert!(first.exited().success(), "SIGTERM must end serve-hostname with 0");
    drop(second);
}

#[test]
fn liveness_turns_unhealthy_after_its_healthy_period() {
    let port = free_port();
    let mut liveness = Image::start(
        &["image", "agnhost", "liveness", &format!("--port={port}"), "--healthy-seconds=2"],
        "127.0.0.1",
        "mypod",
    );
    let url = format!("http://127.0.0.1:{port}/healthz");
    let mut first = None;
    wait_until(START, "liveness answers", || {
        first = get(&url);
        first.is_some()
    });
    assert_eq!(first, answered(200, "ok"), "healthy right after start");
    wait_until(Duration::from_secs(30), "/healthz answers 500", || {
        get(&url).is_some_and(|(status, _)| status == 500)
    });

    // As the real one, which handles no signal: ended by it (130 for SIGINT).
    liveness.signal(Signal::SIGINT);
    assert_eq!(liveness.exited().code(), Some(130));
}

#[test]
fn pause_exits_zero_on_sigterm() {
    // The pause image ignores arguments it is given (`kubectl run --image=kplane/pause -- x`).
    let with_arguments = &["image", "pause", "pause", "--anything"][..];
    for args in [&["image", "pause"][..], &["image", "agnhost", "pause"], with_arguments] {
        let mut pause = Image::start(args, "127.0.0.1", "mypod");
        wait_until(START, "pause handles SIGTERM", || pause.catches_stop_signals());
        pause.signal(Signal::SIGTERM);
        assert!(pause.exited().success(), "{args:?}");
    }
}

#[test]
fn bad_subcommands_and_flags_exit_2() {
    for args in [
        &["image", "agnhost", "nosuch"][..],
        &["image", "agnhost", "netexec", "--bogus=1"],
        &["image", "nosuch"],
        &["exec-limited", "--memory-bytes", "1000000"],
    ] {
        let output = Server::command().args(args).output().expect("run kplane");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(!output.stderr.is_empty(), "{args:?} must say why on stderr");
    }
}

/// Runs `kplane exec-limited <args>`; returns exit code, stdout and stderr.
fn exec_limited(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Server::command().arg("exec-limited").args(args).output().expect("run kplane");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn exec_limited_applies_limits_to_the_program_it_becomes() {
    // `ulimit -d` reports RLIMIT_DATA in KiB: 1000000 / 1024 = 976.
    let (code, stdout, stderr) =
        exec_limited(&["--memory-bytes", "1000000", "--", "sh", "-c", "ulimit -d"]);
    assert_eq!((code, stdout.trim()), (Some(0), "976"), "{stderr}");

    let (code, stdout, stderr) =
        exec_limited(&["--max-open-files", "64", "--", "sh", "-c", "ulimit -n; exit 5"]);
    assert_eq!((code, stdout.trim()), (Some(5), "64"), "{stderr}");
}

#[test]
fn exec_limited_reports_programs_it_cannot_run() {
    let (code, _, stderr) = exec_limited(&["--", "/nonexistent/kplane-test-program"]);
    assert_eq!(code, Some(127), "{stderr}");
    assert!(stderr.contains("cannot run"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let (code, _, stderr) =
        exec_limited(&["--memory-bytes", "100000000", "--", script.to_str().unwrap()]);
    assert_eq!(code, Some(126), "{stderr}");
}

#[test]
fn exec_limited_with_an_exit_file_stays_passes_signals_on_and_notes_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let note = dir.path().join("exit.json");
    let ready = dir.path().join("ready");
    let noted = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&note).expect("the exit is noted")).unwrap()
    };
    // SIGTERM sent to the first process reaches the command, whose trap decides the code.
    let script =
        format!("trap 'exit 5' TERM; touch {}; while :; do sleep 0.05; done", ready.display());
    let mut first = Server::command()
        .args(["exec-limited", "--exit-file", note.to_str().unwrap(), "--", "sh", "-c", &script])
        .spawn()
        .expect("run kplane");
    wait_until(START, "the command has set its trap", || ready.exists());
    kill(Pid::from_raw(first.id() as i32), Signal::SIGTERM).unwrap();
    let mut status = None;
    wait_until(START, "the first process exits", || {
        status = first.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(5), "it exits as its command did");
    assert_eq!((&noted()["pid"], &noted()["exitCode"]), (&json!(first.id()), &json!(5)));

    // A program that leaves its signal mask as it finds it (sleep) has none blocked: SIGTERM
    // ends it.
    let mut first = Server::command()
        .args(["exec-limited", "--exit-file", note.to_str().unwrap(), "--", "sleep", "1000"])
        .spawn()
        .expect("run kplane");
    let children = format!("/proc/{0}/task/{0}/children", first.id());
    let mut sleep = String::new();
    wait_until(START, "the program runs", || {
        sleep = std::fs::read_to_string(&children).unwrap_or_default().trim().to_string();
        let cmdline = std::fs::read(format!("/proc/{sleep}/cmdline")).unwrap_or_default();
        cmdline.starts_with(b"sleep\0")
    });
    let status = std::fs::read_to_string(format!("/proc/{sleep}/status")).unwrap();
    let blocked = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
    assert_eq!(blocked.split_whitespace().nth(1), Some("0000000000000000"), "{blocked}");
    kill(Pid::from_raw(first.id() as i32), Signal::SIGTERM).unwrap();
    let mut status = None;
    wait_until(START, "the first process exits", || {
        status = first.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(143));
    assert_eq!(noted()["exitCode"], 143);
    assert!(noted()["finishedAt"].is_string(), "{}", noted());

    // A command killed by a signal: 128 + the signal, as a runtime reports it.
    let args = ["--exit-file", note.to_str().unwrap(), "--", "sh", "-c", "kill -KILL $$"];
    let (code, _, stderr) = exec_limited(&args);
    assert_eq!(code, Some(137), "{stderr}");
    assert_eq!(noted()["exitCode"], 137);

    // One that cannot start is noted with a shell's code.
    let args = ["--exit-file", note.to_str().unwrap(), "--", "/nonexistent/kplane-test-program"];
    let (code, _, stderr) = exec_limited(&args);
    assert_eq!(code, Some(127), "{stderr}");
    assert!(stderr.contains("cannot run"), "{stderr}");
    assert_eq!(noted()["exitCode"], 127);
}

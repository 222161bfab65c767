//! Container lifecycle hooks (`lifecycle.postStart`, `lifecycle.preStop`): running one handler
//! (exec, httpGet or sleep) for a container, as the kubelet's handler runner does, and its
//! failure in the kubelet's words. When a hook runs, and what its outcome does to the container,
//! is the pod worker's.

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Which hook of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    PostStart,
    PreStop,
}

/// Where a hook runs: the container's environment, working directory and process group, its
/// pod's IP, and how the kubelet names them (`Container "web" in Pod "web-1_default(uid)"`).
pub struct HookTarget {
    pub env: Vec<(String, String)>,
    pub working_dir: Option<std::path::PathBuf>,
    /// The command-line prefix that runs a command with the container's host name and as its
    /// user and groups.
    pub launchers: Vec<String>,
    /// The container's process group: an exec hook's processes join it, so that they end
    /// with the container (as a command exec'd in a container does).
    pub group: Option<u32>,
    pub pod_ip: String,
    /// `Container "c" in Pod "name_namespace(uid)"`.
    pub named: String,
}

/// Runs `handler` of `container` once; `Err` is the kubelet's message for its failure, `Ok`
/// holds the warning it recorded on the way, if any (an HTTPS hook answered over HTTP). An
/// exec handler's processes end with the container; its command is killed when this future is
/// dropped.
pub async fn run(
    handler: &LifecycleHandler,
    container: &Container,
    target: &HookTarget,
) -> Result<Option<String>, String> {
    let named = &target.named;
    if let Some(exec) = &handler.exec {
        let command = exec.command.clone().unwrap_or_default();
        return run_exec(&command, target).await.map(|()| None).map_err(|(error, output)| {
            format!(
                "Exec lifecycle hook ([{}]) for {named} failed - error: {error}, message: {output:?}",
                command.join(" ")
            )
        });
    }
    if let Some(http) = &handler.http_get {
        let path = http.path.as_deref().unwrap_or("");
        return run_http(http, container, target).await.map_err(|error| {
            format!("HTTP lifecycle hook ({path}) for {named} failed - error: {error}")
        });
    }
    if let Some(sleep) = &handler.sleep {
        tokio::time::sleep(Duration::from_secs(sleep.seconds.max(0) as u64)).await;
        return Ok(None);
    }
    // `tcpSocket` is kept in the API for compatibility only: the kubelet runs no such hook.
    Err(format!("Cannot run handler: invalid handler: {}", handler_kind(handler)))
}

fn handler_kind(handler: &LifecycleHandler) -> &'static str {
    if handler.tcp_socket.is_some() {
        "tcpSocket"
    } else {
        "none given"
    }
}

/// Kills a hook's own process group when the hook is given up (its future dropped).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0.filter(|g| *g > 1) {
            let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
    }
}

/// How much of a hook command's output is kept (its message), as the kubelet keeps 10 KiB.
const OUTPUT_KEPT: usize = 10 * 1024;
/// How long a finished hook command's output is read for: a process it left running may
/// hold its pipes open.
const OUTPUT_DRAIN: Duration = Duration::from_millis(200);

/// Runs `command` in the container's environment and process group (in a group of its own
/// when it cannot join the container's, a terminal's session); on failure, the error as the
/// runtime words it and what the command wrote.
async fn run_exec(command: &[String], target: &HookTarget) -> Result<(), (String, String)> {
    let spawn = |group: u32| {
        let mut process = super::runtime::command(
            &[&target.launchers[..], command].concat(),
            &target.env,
            target.working_dir.as_deref(),
        )?;
        process
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(group as i32);
        Some(super::runtime::huge_pages::spawn(&mut process))
    };
    let joined = target.group.filter(|g| *g > 1).and_then(|group| spawn(group)?.ok());
    let in_container = joined.is_some();
    let mut child = match joined {
        Some(child) => child,
        None => match spawn(0) {
            None => return Err(("the command is empty".into(), String::new())),
            Some(spawned) => {
                spawned.map_err(|e| (format!("command {command:?}: {e}"), String::new()))?
            }
        },
    };
    // In a group of its own, what it started goes when it is given up.
    let mut guard =
        GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()).filter(|_| !in_container));
    // What it writes, up to a bound (the rest is read and let go).
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
        tokio::spawn(async move {
            let mut kept = Vec::new();
            let mut buffer = [0u8; 4096];
            let Some(mut pipe) = pipe else { return kept };
            while let Ok(n) = tokio::io::AsyncReadExt::read(&mut pipe, &mut buffer).await {
                if n == 0 {
                    break;
                }
                let room = OUTPUT_KEPT.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
            kept
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let status = child.wait().await;
    guard.0 = None;
    let status = status.map_err(|e| (e.to_string(), String::new()))?;
    if status.success() {
        stdout.abort();
        stderr.abort();
        return Ok(());
    }
    let drained = |task: tokio::task::JoinHandle<Vec<u8>>| async move {
        let abort = task.abort_handle();
        let bytes = tokio::time::timeout(OUTPUT_DRAIN, task).await;
        abort.abort();
        String::from_utf8_lossy(&bytes.ok().and_then(Result::ok).unwrap_or_default()).into_owned()
    };
    let (stdout, stderr) = (drained(stdout).await, drained(stderr).await);
    let written = format!("{stdout}{stderr}");
    let code = super::runtime::exit_code(status);
    Err((format!("command '{}' exited with {code}: {stderr}", command.join(" ")), written))
}

/// A GET to the hook's address, redirects followed on its host: any response will do, as the
/// kubelet takes one (only a request that gets none fails). An HTTPS hook answered in plain
/// HTTP is asked again over HTTP, as the kubelet does; the warning it records for that is
/// returned.
async fn run_http(
    http: &k8s_openapi::api::core::v1::HTTPGetAction,
    container: &Container,
    target: &HookTarget,
) -> Result<Option<String>, String> {
    use super::probes::http::{get_following, ErrorKind, Target};
    let port = super::probes::resolve_port(&http.port, container)?;
    let mut target = Target::of(http, port, &target.pod_ip);
    let headers = Target::headers_of(http);
    match get_following(&target, &headers, "kube-lifecycle/1.32").await {
        Ok(_) => Ok(None),
        Err(error) if error.kind == ErrorKind::PlainHttpAnswer => {
            target.https = false;
            let headers: Vec<_> = headers
                .into_iter()
                .filter(|(n, _)| !n.eq_ignore_ascii_case("Authorization"))
                .collect();
            get_following(&target, &headers, "kube-lifecycle/1.32")
                .await
                .map_err(|_| error.text)?;
            let host = target.authority();
            Ok(Some(format!(
                "request to HTTPS lifecycle hook {host} got HTTP response, retry with HTTP succeeded"
            )))
        }
        Err(error) => Err(error.text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn handler(value: serde_json::Value) -> LifecycleHandler {
        serde_json::from_value(value).unwrap()
    }

    fn container() -> Container {
        serde_json::from_value(json!({"name": "c", "ports": [{"name": "web", "containerPort": 1}]}))
            .unwrap()
    }

    /// Waits (ten seconds at most) until process `pid` is gone (or a zombie).
    async fn wait_gone(pid: i32, otherwise: &str) {
        for _ in 0..500 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{otherwise} (pid {pid})");
    }

    fn target(dir: &std::path::Path) -> HookTarget {
        HookTarget {
            env: vec![("GREETING".into(), "hi".into())],
            working_dir: Some(dir.to_path_buf()),
            launchers: Vec::new(),
            group: None,
            pod_ip: "127.0.0.1".into(),
            named: "Container \"c\" in Pod \"p_default(u1)\"".into(),
        }
    }

    #[tokio::test]
    async fn exec_hooks_run_in_the_containers_environment_and_say_why_they_failed() {
        let dir = tempfile::tempdir().unwrap();
        let ok = handler(json!({"exec": {"command": ["sh", "-c", "echo $GREETING > said"]}}));
        run(&ok, &container(), &target(dir.path())).await.unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("said")).unwrap(), "hi\n");
        let failing =
            handler(json!({"exec": {"command": ["sh", "-c", "echo out; echo err >&2; exit 3"]}}));
        let error = run(&failing, &container(), &target(dir.path())).await.unwrap_err();
        assert_eq!(
            error,
            "Exec lifecycle hook ([sh -c echo out; echo err >&2; exit 3]) for Container \"c\" in \
             Pod \"p_default(u1)\" failed - error: command 'sh -c echo out; echo err >&2; exit 3' \
             exited with 3: err\n, message: \"out\\nerr\\n\""
        );
    }

    #[tokio::test]
    async fn a_dropped_exec_hook_takes_its_processes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let slow =
            handler(json!({"exec": {"command": ["sh", "-c", "sleep 1000 & echo $! > pid; wait"]}}));
        let (container, target) = (container(), target(dir.path()));
        let mut hook = Box::pin(run(&slow, &container, &target));
        let pid_file = dir.path().join("pid");
        let pid: u32 = loop {
            tokio::select! {
                ended = &mut hook => panic!("the hook ended: {ended:?}"),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            let written = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if let Ok(pid) = written.trim().parse() {
                break pid;
            }
        };
        drop(hook);
        wait_gone(pid as i32, "the hook's child outlived it").await;
    }

    #[tokio::test]
    async fn an_exec_hook_joins_its_containers_process_group() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let mut container = std::process::Command::new("sleep");
        let mut container = container.arg("1000").process_group(0).spawn().unwrap();
        let mut at = target(dir.path());
        at.group = Some(container.id());
        let leaves =
            handler(json!({"exec": {"command": ["sh", "-c", "sleep 1000 & echo $! > pid"]}}));
        run(&leaves, &self::container(), &at).await.unwrap();
        let pid: i32 =
            std::fs::read_to_string(dir.path().join("pid")).unwrap().trim().parse().unwrap();
        let group = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let group: u32 =
            group.rsplit(") ").next().unwrap().split(' ').nth(2).unwrap().parse().unwrap();
        assert_eq!(group, container.id(), "in the container's group");
        killpg(Pid::from_raw(container.id() as i32), Signal::SIGKILL).unwrap();
        container.wait().unwrap();
        wait_gone(pid, "the hook's child outlived its container").await;
    }

    #[tokio::test]
    async fn http_hooks_take_any_answer_and_fail_without_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1024];
            let n = socket.read(&mut buf).await.unwrap();
            let reply = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
            socket.write_all(reply).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let dir = tempfile::tempdir().unwrap();
        let hook = handler(json!({"httpGet": {"path": "/stop", "port": port}}));
        run(&hook, &container(), &target(dir.path())).await.unwrap();
        let request = server.await.unwrap();
        assert!(request.starts_with("GET /stop HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("User-Agent: kube-lifecycle/1.32\r\n"), "{request}");

        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = free.local_addr().unwrap().port();
        drop(free);
        let refused = handler(json!({"httpGet": {"path": "/stop", "port": closed}}));
        let error = run(&refused, &container(), &target(dir.path())).await.unwrap_err();
        assert_eq!(
            error,
            format!(
                "HTTP lifecycle hook (/stop) for Container \"c\" in Pod \"p_default(u1)\" failed - \
                 error: Get \"http://127.0.0.1:{closed}/stop\": dial tcp 127.0.0.1:{closed}: \
                 connect: connection refused"
            )
        );
        let tcp = handler(json!({"tcpSocket": {"port": 80}}));
        let error = run(&tcp, &container(), &target(dir.path())).await.unwrap_err();
        assert_eq!(error, "Cannot run handler: invalid handler: tcpSocket");
    }

    #[tokio::test]
    async fn an_https_hook_answered_in_http_is_asked_again_over_http() {
        // A plain HTTP server: its answer to the TLS hello is what tells the hook.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = tokio::spawn(async move {
            let mut requests = Vec::new();
            for _ in 0..2 {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 1024];
                let n = socket.read(&mut buf).await.unwrap();
                let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
                socket.write_all(reply).await.unwrap();
                requests.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            requests
        });
        let dir = tempfile::tempdir().unwrap();
        let hook = handler(json!({"httpGet": {"scheme": "HTTPS", "path": "/stop", "port": port,
            "httpHeaders": [{"name": "Authorization", "value": "Bearer x"}]}}));
        let warned = run(&hook, &container(), &target(dir.path())).await.unwrap();
        assert_eq!(
            warned.as_deref(),
            Some(&*format!(
                "request to HTTPS lifecycle hook 127.0.0.1:{port} got HTTP response, retry with HTTP succeeded"
            ))
        );
        let requests = asked.await.unwrap();
        // The retry leaves the credentials out.
        assert!(requests[1].starts_with("GET /stop HTTP/1.1\r\n"), "{requests:?}");
        assert!(!requests[1].contains("Authorization"), "{requests:?}");
    }

    #[tokio::test]
    async fn a_sleep_hook_sleeps() {
        let dir = tempfile::tempdir().unwrap();
        let sleep = handler(json!({"sleep": {"seconds": 1}}));
        let started = std::time::Instant::now();
        run(&sleep, &container(), &target(dir.path())).await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(1));
    }
}

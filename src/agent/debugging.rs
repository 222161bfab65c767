//! The agent's debugging handlers (`agent.enable_debugging_handlers`): `/run` (a command's
//! output), `/exec` (a command over a websocket), `/attach` (a container's output, stdin and
//! terminal over a websocket), `/portForward` (TCP to the pod over a websocket, in
//! `port_forward`) and `/debug/pprof/` (a summary of the agent process). Websockets speak the
//! Kubernetes channel protocol: every binary frame starts with its channel (0 stdin, 1 stdout,
//! 2 stderr, 3 error/status, 4 terminal size; in v5, `255 c` closes channel c: the end of
//! stdin).

use std::process::Stdio;
use std::time::Duration;

use actix::Addr;
use actix_web::http::header::{HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use actix_web::{web, HttpRequest, HttpResponse};
use futures::StreamExt;
use kplane_actors::agent::log_lines::{LogReader, Stream};
use kplane_actors::agent::runtime::{
    exit_code, findable, huge_pages, ProcessRuntime, Runtime, StopSignal,
};
use kplane_actors::agent::{ContainerLookup, ExecTarget, NodeAgent};

use super::terminal::{TerminalSize, DRAIN, RESIZE};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{AgentHttp, AgentHttpError};

pub(super) const STDIN: u8 = 0;
pub(super) const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
/// The channel of v5's close signals: `[CLOSE, channel]` closes that channel (stdin: its end).
pub(super) const CLOSE: u8 = 255;
/// Subprotocols spoken, best first.
pub(super) const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"];
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a client is given, after the upgrade, to be ready for frames.
pub(super) const CLIENT_SETUP: Duration = Duration::from_millis(20);

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/run/{namespace}/{pod}/{container}", web::post().to(run))
        .route("/exec/{namespace}/{pod}/{container}", web::get().to(exec))
        .route("/exec/{namespace}/{pod}/{container}", web::post().to(exec))
        .route("/attach/{namespace}/{pod}/{container}", web::get().to(attach))
        .route("/attach/{namespace}/{pod}/{container}", web::post().to(attach))
        .route("/portForward/{namespace}/{pod}", web::get().to(super::port_forward::serve))
        .route("/portForward/{namespace}/{pod}", web::post().to(super::port_forward::serve))
        .route("/debug/pprof/", web::get().to(pprof));
}

/// The container an exec, a run or (`attach`) an attach is for, if it runs.
async fn container(
    state: &AgentHttp,
    (namespace, pod, container): (String, String, String),
    attach: bool,
) -> Result<ExecTarget, AgentHttpError> {
    let attach_to = attach.then_some((namespace.as_str(), pod.as_str()));
    let not_found = kplane_actors::agent::container_not_found(&container, attach_to);
    let lookup = ContainerLookup { namespace, pod, container };
    let found = state.agent().send(lookup).await.map_err(|_| AgentHttpError::Unavailable)?;
    found.ok_or(AgentHttpError::NotFound(not_found))
}

/// The query as (key, value) pairs, keys repeated (`command=a&command=b`).
pub(super) fn pairs(req: &HttpRequest) -> Result<Vec<(String, String)>, AgentHttpError> {
    serde_urlencoded::from_str(req.query_string())
        .map_err(|e| AgentHttpError::BadRequest(format!("bad query: {e}")))
}

/// The streams an exec or attach asks for (`stdin`, `stdout`, `stderr`).
struct Streams {
    stdin: bool,
    stdout: bool,
    stderr: bool,
}

impl Streams {
    /// At least one must be asked for, as the kubelet requires.
    fn asked(pairs: &[(String, String)]) -> Result<Self, AgentHttpError> {
        let streams = Streams {
            stdin: flag(pairs, "stdin"),
            stdout: flag(pairs, "stdout"),
            stderr: flag(pairs, "stderr"),
        };
        if !(streams.stdin || streams.stdout || streams.stderr) {
            return Err(AgentHttpError::BadRequest(
                "you must specify at least 1 of stdin, stdout, stderr".into(),
            ));
        }
        Ok(streams)
    }
}

/// A boolean query parameter (`stdin`, `tty`...), read as the API server reads them.
fn flag(pairs: &[(String, String)], key: &str) -> bool {
    // As the API server reads the flags it relays: the first value counts, and only `0` and
    // `false` (in any case) are false, an empty one is true.
    let first = pairs.iter().find(|(k, _)| k == key);
    first.is_some_and(|(_, v)| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// A command run in a container's environment and working directory, as its user (the
/// container's `run_as` prefix innermost, after any launcher in `argv`).
pub(super) fn command(
    target: &ExecTarget,
    argv: &[String],
) -> Result<tokio::process::Command, AgentHttpError> {
    let mut command =
        kplane_actors::agent::runtime::command(argv, &target.env, target.working_dir.as_deref())
            .ok_or_else(|| AgentHttpError::BadRequest("a command is required".into()))?;
    command.kill_on_drop(true);
    Ok(command)
}

/// `argv` as it is exec'd in `target` (through the launchers that give it the container's
/// host name and user), or the error its spawn would give: the program is looked for first,
/// so that a missing one is refused as a spawn refuses it rather than being a launcher's exit.
pub(super) fn exec_line(target: &ExecTarget, argv: &[String]) -> std::io::Result<Vec<String>> {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    if !findable(program, target.working_dir.as_deref()) {
        // The spawn's own error.
        return Err(nix::errno::Errno::ENOENT.into());
    }
    Ok(target.launched(argv))
}

/// POST `/run/{ns}/{pod}/{container}?cmd=...`: runs the command, answers its output.
async fn run(
    state: web::Data<AgentHttp>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, AgentHttpError> {
    let target = container(&state, path.into_inner(), false).await?;
    let mut pairs = pairs(&req)?;
    if let Ok(form) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body) {
        pairs.extend(form);
    }
    let cmd = pairs
        .iter()
        .find(|(k, _)| k == "cmd")
        .map(|(_, v)| v.clone())
        .ok_or_else(|| AgentHttpError::BadRequest("the cmd parameter is required".into()))?;
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    if argv.is_empty() {
        return Err(AgentHttpError::BadRequest("a command is required".into()));
    }
    let failed = |e: std::io::Error| AgentHttpError::BadRequest(format!("{cmd:?}: {e}"));
    let mut command = command(&target, &exec_line(&target, &argv).map_err(failed)?)?;
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = huge_pages::spawn(&mut command).map_err(failed)?;
    let output = tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| AgentHttpError::BadRequest(format!("{cmd:?} ran longer than 60 s")))?
        .map_err(failed)?;
    // As the kubelet's run: the output (stdout, then stderr) as it is, under a JSON content
    // type; a command that failed is a 500 saying how it exited, with its stderr.
    if !output.status.success() {
        let code = exit_code(output.status);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let message = format!("command '{}' exited with {code}: {stderr}", argv.join(" "));
        return Ok(HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .body(message));
    }
    let mut text = output.stdout;
    text.extend_from_slice(&output.stderr);
    Ok(HttpResponse::Ok().content_type("application/json").body(text))
}

/// An accepted websocket: the answer to send, the session to write to, the client's messages
/// (fragmented ones whole) and the subprotocol agreed on, if any.
pub(crate) struct Upgraded {
    pub response: HttpResponse,
    pub session: actix_ws::Session,
    pub messages: actix_ws::AggregatedMessageStream,
    pub protocol: Option<&'static str>,
}

/// Accepts the websocket, agreeing on the first of `protocols` the client offered.
pub(crate) fn upgrade(
    req: &HttpRequest,
    payload: web::Payload,
    protocols: &[&'static str],
) -> Result<Upgraded, AgentHttpError> {
    let protocol = protocols.iter().copied().find(|p| offers(req, p));
    let (mut response, session, stream) = actix_ws::handle(req, payload)
        .map_err(|e| AgentHttpError::BadRequest(format!("a websocket upgrade is required: {e}")))?;
    if let Some(protocol) = protocol {
        response.headers_mut().insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol));
    }
    let messages = stream
        .max_frame_size(MAX_MESSAGE_BYTES)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE_BYTES);
    Ok(Upgraded { response, session, messages, protocol })
}

/// The largest message a client may send, as the kubelet's WebSocket server takes
/// (golang.org/x/net/websocket's 32 MiB): the Python client sends each write of stdin, and
/// port-forward each read of its local socket (up to 1 MiB), as one message.
const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Whether the client offered the WebSocket subprotocol `protocol`.
pub(crate) fn offers(req: &HttpRequest, protocol: &str) -> bool {
    req.headers()
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|offered| offered.trim() == protocol)
}

pub(super) fn framed(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(data.len() + 1);
    frame.push(channel);
    frame.extend_from_slice(data);
    frame
}

/// The next message of a client, until it closes. Text frames carry channels as binary ones
/// do (the Python client sends its stdin as text), as the kubelet reads them; a ping is
/// answered on `session` (kubectl pings every 5 s and gives up on a quiet stream without
/// pongs).
pub(super) async fn next_message(
    messages: &mut actix_ws::AggregatedMessageStream,
    session: &mut actix_ws::Session,
) -> Option<bytes::Bytes> {
    while let Some(Ok(message)) = messages.next().await {
        match message {
            actix_ws::AggregatedMessage::Binary(data) => return Some(data),
            actix_ws::AggregatedMessage::Text(text) => return Some(text.into_bytes()),
            actix_ws::AggregatedMessage::Ping(ping) => {
                let _ = session.pong(&ping).await;
            }
            actix_ws::AggregatedMessage::Close(_) => return None,
            _ => {}
        }
    }
    None
}

/// Ends an exec's websocket: its final status on the error channel, then a normal close.
pub(crate) async fn finish(mut session: actix_ws::Session, status: Value) {
    let _ = session.binary(framed(ERROR, status.to_string().as_bytes())).await;
    let _ = session.close(Some(actix_ws::CloseCode::Normal.into())).await;
}

/// The final status of an exec whose command could not be started: an internal error (500)
/// in Kubernetes' words and shape (clients read its `details`).
pub(super) fn not_started(argv: &[String], error: &std::io::Error) -> Value {
    let command = argv.first().map(String::as_str).unwrap_or_default();
    let why = match error.kind() {
        std::io::ErrorKind::NotFound => "executable file not found in $PATH".to_string(),
        _ => error.to_string(),
    };
    let cause = format!("error executing command in container: exec: {command:?}: {why}");
    json!({"metadata": {}, "status": "Failure",
        "message": format!("Internal error occurred: {cause}"), "reason": "InternalError",
        "details": {"causes": [{"message": cause}]}, "code": 500})
}

/// SIGKILLs what an exec'd command `leader` leads (its process group, and its session's when
/// it leads one), as a container's processes are stopped.
pub(super) fn kill_group(leader: Option<u32>) {
    if let Some(leader) = leader {
        ProcessRuntime::default().signal(leader, StopSignal::Kill);
    }
}

/// The final status of an exec, as the channel protocol reports it.
pub(super) fn exit_status(code: Option<i32>) -> Value {
    match code {
        Some(0) => json!({"metadata": {}, "status": "Success"}),
        code => {
            let code = code.map_or("unknown".to_string(), |c| c.to_string());
            json!({"metadata": {}, "status": "Failure",
                "message": format!("command terminated with non-zero exit code: {code}"),
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": code}]}})
        }
    }
}

/// `/exec/{ns}/{pod}/{container}?command=...&stdin=1&stdout=1&stderr=1`: runs a command in the
/// container's environment over a websocket; with `tty=1`, on a pty (`terminal`).
async fn exec(
    state: web::Data<AgentHttp>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, AgentHttpError> {
    let pairs = pairs(&req)?;
    let argv: Vec<String> =
        pairs.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect();
    let streams = Streams::asked(&pairs)?;
    let key = path.into_inner();
    let target = container(&state, key.clone(), false).await?;
    // A command exec'd in a container ends with it, as in its PID namespace.
    let container_gone = {
        let (target, agent) = (target.clone(), state.agent().clone());
        async move { exited(&target, &key, &agent).await }
    };
    if flag(&pairs, "tty") {
        return super::terminal::exec(target, argv, &req, payload, container_gone).await;
    }
    let line = exec_line(&target, &argv);
    let mut command = command(&target, line.as_deref().unwrap_or(&argv))?;
    let piped_if = |asked: bool| if asked { Stdio::piped() } else { Stdio::null() };
    // A group of its own: what it starts is stopped with it. What the client did not ask
    // for goes nowhere, as the kubelet gives the runtime only the streams asked for.
    command
        .stdin(piped_if(streams.stdin))
        .stdout(piped_if(streams.stdout))
        .stderr(piped_if(streams.stderr))
        .process_group(0);
    let Upgraded { response, session, mut messages, .. } = upgrade(&req, payload, PROTOCOLS)?;
    let mut child = match line.and_then(|_| huge_pages::spawn(&mut command)) {
        Ok(child) => child,
        Err(e) => {
            finish(session, not_started(&argv, &e)).await;
            return Ok(response);
        }
    };
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    actix_web::rt::spawn(async move {
        // Both outputs are read from the start, as they come, into one queue, so that the
        // client gets them in the order the command wrote them (tar's error before its empty
        // archive, at whose end `kubectl cp` stops reading; before, both waited out the
        // client's set-up and stdout's went first). Both at once, too: a command filling one
        // pipe must not wait on the other's reader.
        let (queued, mut queue) = tokio::sync::mpsc::channel::<(u8, Vec<u8>)>(32);
        let read = |channel: u8,
                    mut pipe: Box<dyn tokio::io::AsyncRead + Unpin>,
                    queued: tokio::sync::mpsc::Sender<(u8, Vec<u8>)>| async move {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                if queued.send((channel, buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        };
        let out = stdout.map(|p| read(STDOUT, Box::new(p), queued.clone()));
        let err = stderr.map(|p| read(STDERR, Box::new(p), queued.clone()));
        drop(queued);
        let readers = futures::future::join(
            async {
                if let Some(out) = out {
                    out.await;
                }
            },
            async {
                if let Some(err) = err {
                    err.await;
                }
            },
        );
        // Whether the client was still there when the outputs ended.
        let mut relayed_to = session.clone();
        let relay = async move {
            // kubectl 1.32 discards frames that reach it before it has set up its streams
            // ("Unknown stream id"): a command quicker than that lost its output (1 exec in 60
            // of `echo`). Its output waits in the queue for a moment.
            tokio::time::sleep(CLIENT_SETUP).await;
            while let Some((channel, data)) = queue.recv().await {
                if relayed_to.binary(framed(channel, &data)).await.is_err() {
                    return false;
                }
            }
            true
        };
        let outputs = futures::future::join(readers, relay);
        let input = async {
            let mut pongs = session.clone();
            while let Some(data) = next_message(&mut messages, &mut pongs).await {
                if data.first() == Some(&STDIN) {
                    if let Some(pipe) = stdin.as_mut() {
                        if pipe.write_all(&data[1..]).await.is_err() {
                            stdin = None;
                        }
                    }
                } else if data[..] == [CLOSE, STDIN] {
                    // v5: the client's stdin has ended; the command goes on.
                    drop(stdin.take());
                }
            }
            // The stream ended or was closed: the client has left (the channel protocol has no
            // way to close only its sending side).
            drop(stdin.take());
        };
        let group = child.id();
        tokio::select! {
            (_, relayed) = outputs => {
                if !relayed {
                    // The client left while the command was printing: stop it.
                    kill_group(group);
                }
            }
            () = input => {
                // Nobody is left to read what it prints: stop the command.
                kill_group(group);
            }
            () = container_gone => kill_group(group),
        }
        let code = child.wait().await.ok().map(exit_code);
        finish(session, exit_status(code)).await;
    });
    Ok(response)
}

/// `/attach/{ns}/{pod}/{container}?stdin=1&stdout=1`: the container's output from now on,
/// until it exits or the client leaves. With `stdin`, what the client sends goes to the
/// container's stdin when its spec asks for one (`stdin: true`; without it, the input goes
/// nowhere, as with containerd); with `stdinOnce`, that stdin closes when the first attached
/// client's input ends. A container with `tty: true` is attached on its terminal, whatever
/// `tty` asks (the kubelet's rule: it cannot change once the container runs): the client sees
/// what it shows, types into it and resizes it.
async fn attach(
    state: web::Data<AgentHttp>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, AgentHttpError> {
    let pairs = pairs(&req)?;
    let streams = Streams::asked(&pairs)?;
    let key = path.into_inner();
    let target = container(&state, key.clone(), true).await?;
    let io = target.io.clone();
    let input = io.clone().filter(|io| flag(&pairs, "stdin") && io.interactive().stdin);
    // Taken now, so that nothing shown or logged from here on is missed.
    let screen = io.as_ref().and_then(|io| io.screen());
    let offset = std::fs::metadata(&target.log_path).map(|m| m.len()).unwrap_or(0);
    let Upgraded { response, session, mut messages, .. } = upgrade(&req, payload, PROTOCOLS)?;
    let agent = state.agent().clone();
    actix_web::rt::spawn(async move {
        let typed = async {
            let mut pongs = session.clone();
            while let Some(data) = next_message(&mut messages, &mut pongs).await {
                match (data.first(), &input) {
                    (Some(&STDIN), Some(io)) => {
                        // Once the container's stdin is closed (stdinOnce), input is dropped.
                        let _ = io.write(&data[1..]).await;
                    }
                    (Some(&STDIN), None) => {}
                    (Some(&RESIZE), _) => {
                        if let (Some(io), Some(size)) = (&io, TerminalSize::parse(&data[1..])) {
                            io.resize(size.width, size.height);
                        }
                    }
                    (_, Some(io)) if data[..] == [CLOSE, STDIN] => io.attached_input_ended().await,
                    _ => {}
                }
            }
        };
        tokio::time::sleep(CLIENT_SETUP).await;
        let shown = async {
            let Some(screen) = screen else {
                let (target, key) = (&target, &key);
                let followed = log_followed(target, offset, key, &agent, &streams, session.clone());
                return followed.await;
            };
            let shown = terminal_shown(screen, session.clone());
            tokio::pin!(shown);
            tokio::select! {
                () = &mut shown => {}
                () = exited(&target, &key, &agent) => {
                    // What it showed last may still be on its way through the relay.
                    let _ = tokio::time::timeout(DRAIN, shown).await;
                }
            }
        };
        tokio::select! {
            () = typed => {}
            () = shown => {}
        }
        // The client has left, or the container has exited: either way, this client's input
        // has ended.
        if let Some(io) = &input {
            io.attached_input_ended().await;
        }
        finish(session, exit_status(Some(0))).await;
    });
    Ok(response)
}

/// Sends what a container's terminal shows, until the terminal closes or the client leaves.
async fn terminal_shown(
    mut screen: tokio::sync::broadcast::Receiver<bytes::Bytes>,
    mut session: actix_ws::Session,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match screen.recv().await {
            Ok(shown) => {
                if session.binary(framed(STDOUT, &shown)).await.is_err() {
                    return;
                }
            }
            // A client too slow for the terminal misses what it fell behind on.
            Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
    }
}

/// Sends what a container writes to its log from `offset` on, each stream the client asked
/// for on its channel, until it exits (this run of it) or the client leaves.
async fn log_followed(
    target: &ExecTarget,
    offset: u64,
    key: &(String, String, String),
    agent: &Addr<NodeAgent>,
    streams: &Streams,
    mut session: actix_ws::Session,
) {
    // The output as the container wrote it, without the log's times.
    let mut output = LogReader::new(false, None);
    let mut followed = super::http::FollowedFile::new(target.log_path.clone(), offset);
    loop {
        tokio::time::sleep(EXIT_POLL).await;
        let running = still_running(target, key, agent).await;
        // Read after the look-up: a container that has exited has written all it will.
        let more = output.read_by_stream(&followed.read_more());
        for (stream, bytes) in more {
            let channel = match stream {
                Stream::Stdout if streams.stdout => STDOUT,
                Stream::Stderr if streams.stderr => STDERR,
                _ => continue,
            };
            if session.binary(framed(channel, &bytes)).await.is_err() {
                return;
            }
        }
        if !running {
            return;
        }
    }
}

/// How often an attach looks whether its container still runs.
const EXIT_POLL: Duration = Duration::from_millis(200);

/// Resolves once the container `target` was (this run of it) has exited.
pub(super) async fn exited(
    target: &ExecTarget,
    key: &(String, String, String),
    agent: &Addr<NodeAgent>,
) {
    while still_running(target, key, agent).await {
        tokio::time::sleep(EXIT_POLL).await;
    }
}

async fn still_running(
    target: &ExecTarget,
    (namespace, pod, container): &(String, String, String),
    agent: &Addr<NodeAgent>,
) -> bool {
    let lookup = ContainerLookup {
        namespace: namespace.clone(),
        pod: pod.clone(),
        container: container.clone(),
    };
    matches!(agent.send(lookup).await, Ok(Some(now)) if now.pid == target.pid)
}

/// `/debug/pprof/`: what the agent process uses, from /proc/self (no sampling profiler).
async fn pprof() -> HttpResponse {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("?").to_string()
    };
    let usage = super::stats::process_usage(std::process::id());
    let text = format!(
        "kplane agent process {}\ncpu_seconds {:.3}\nresident {}\nvirtual {}\nthreads {}\n",
        std::process::id(),
        usage.cpu_nanoseconds as f64 / 1e9,
        field("VmRSS:"),
        field("VmSize:"),
        field("Threads:"),
    );
    HttpResponse::Ok().content_type("text/plain").body(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_as_the_api_server_reads_them() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        for (value, read) in
            [("1", true), ("true", true), ("", true), ("on", true), ("0", false), ("FALSE", false)]
        {
            assert_eq!(flag(&pairs(&[("stdout", value)]), "stdout"), read, "{value:?}");
        }
        assert!(!flag(&pairs(&[("stdout", "0"), ("stdout", "1")]), "stdout"), "the first counts");
        assert!(!flag(&pairs(&[]), "stdout"));
    }

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn an_exec_or_attach_asks_for_at_least_one_stream() {
        let asked = Streams::asked(&pairs(&[("stdout", "true"), ("stderr", "0")])).unwrap();
        assert!(asked.stdout && !asked.stderr && !asked.stdin);
        let none = Streams::asked(&pairs(&[("command", "true"), ("stdout", "false")]));
        let Err(AgentHttpError::BadRequest(message)) = none else { panic!("refused") };
        assert_eq!(message, "you must specify at least 1 of stdin, stdout, stderr");
    }
}

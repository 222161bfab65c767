//! `exec -t`: a command on a pseudo-terminal. The agent opens a pty, starts the command with
//! the terminal end as its stdin, stdout and stderr, leading a session of its own with that
//! terminal as its controlling one (through `kplane exec-limited --tty`), and joins the
//! websocket to the pty's other end: channel 0 is typed into it, what the terminal shows goes
//! out on channel 1 (stdout and stderr are one stream on a terminal), and channel 4's
//! `{"Width":W,"Height":H}` resizes it, which signals the command with SIGWINCH.

use std::process::Stdio;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use kplane_actors::agent::runtime::terminal::{Controller, Pty};
use kplane_actors::agent::runtime::{exit_code, huge_pages};
use kplane_actors::agent::ExecTarget;
use serde::Deserialize;

use super::debugging::{
    command, exec_line, exit_status, finish, framed, kill_group, next_message, not_started,
    upgrade, Upgraded, CLIENT_SETUP, CLOSE, PROTOCOLS, STDIN, STDOUT,
};
use super::http::AgentHttpError;

/// The channel of terminal sizes, from the client.
pub(super) const RESIZE: u8 = 4;
/// How long a terminal is still read once its command (or container) has exited.
pub(super) const DRAIN: Duration = Duration::from_secs(1);
/// What an end of typed input is on a terminal (Ctrl-D).
const END_OF_TRANSMISSION: u8 = 0x04;

/// A terminal size as the channel protocol sends it on [`RESIZE`].
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TerminalSize {
    pub width: u16,
    pub height: u16,
}

impl TerminalSize {
    /// The size a [`RESIZE`] message carries, if it is one.
    pub(super) fn parse(data: &[u8]) -> Option<TerminalSize> {
        serde_json::from_slice(data).ok()
    }
}

/// What runs the rest of a command line in a session of its own on its stdin, a terminal:
/// this binary's `exec-limited --tty`, through `/proc/self/exe`, which the forked agent still
/// is, even when the file has since been replaced by a newer build. For `exec -t` and for
/// containers with `tty: true`.
pub(super) const LAUNCHER: [&str; 4] = ["/proc/self/exe", "exec-limited", "--tty", "--"];

fn on_terminal(argv: &[String]) -> Vec<String> {
    LAUNCHER.iter().map(|part| part.to_string()).chain(argv.iter().cloned()).collect()
}

/// Runs `argv` in `target`'s environment on a new pty, over the websocket `req` asks for,
/// until it exits, the client leaves or `container_gone` resolves.
pub async fn exec(
    mut target: ExecTarget,
    argv: Vec<String>,
    req: &HttpRequest,
    payload: web::Payload,
    container_gone: impl std::future::Future<Output = ()> + 'static,
) -> Result<HttpResponse, AgentHttpError> {
    if argv.is_empty() {
        return Err(AgentHttpError::BadRequest("a command is required".into()));
    }
    let failed = |e: std::io::Error| AgentHttpError::BadRequest(format!("exec {argv:?}: {e}"));
    let pty = Pty::open().map_err(failed)?;
    kplane_actors::agent::launch::with_terminal_type(&mut target.env);
    let line = exec_line(&target, &argv);
    let mut command = command(&target, &on_terminal(line.as_deref().unwrap_or(&argv)))?;
    let stdio = || pty.terminal.try_clone().map(Stdio::from);
    command.stdin(stdio().map_err(failed)?).stdout(stdio().map_err(failed)?);
    command.stderr(stdio().map_err(failed)?);
    let Upgraded { response, session, mut messages, .. } = upgrade(req, payload, PROTOCOLS)?;
    let spawned = line.and_then(|_| huge_pages::spawn(&mut command));
    // The command holds the terminal now: once it and its children have exited, reading the
    // controller ends (EIO).
    drop(command);
    drop(pty.terminal);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            finish(session, not_started(&argv, &e)).await;
            return Ok(response);
        }
    };
    let controller = match Controller::new(pty.controller) {
        Ok(controller) => controller,
        Err(e) => {
            let _ = child.start_kill();
            finish(session, not_started(&argv, &e)).await;
            return Ok(response);
        }
    };
    actix_web::rt::spawn(async move {
        tokio::time::sleep(CLIENT_SETUP).await;
        let mut out = session.clone();
        let controller = &controller;
        // Whether the client is still there when the terminal has nothing more to show.
        let output = async move {
            let mut buffer = vec![0u8; 16 * 1024];
            while let Ok(n) = controller.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                if out.binary(framed(STDOUT, &buffer[..n])).await.is_err() {
                    return false;
                }
            }
            true
        };
        let input = async {
            let mut pongs = session.clone();
            while let Some(data) = next_message(&mut messages, &mut pongs).await {
                match data.first() {
                    Some(&STDIN) if controller.write_all(&data[1..]).await.is_err() => break,
                    Some(&STDIN) => {}
                    Some(&RESIZE) => {
                        if let Some(size) = TerminalSize::parse(&data[1..]) {
                            controller.resize(size.width, size.height);
                        }
                    }
                    _ if data[..] == [CLOSE, STDIN] => {
                        // A terminal cannot be half-closed: its end of input is typed.
                        let _ = controller.write_all(&[END_OF_TRANSMISSION]).await;
                    }
                    _ => {}
                }
            }
        };
        tokio::pin!(output);
        // The command leads a session and a group of its own (its launcher's setsid).
        let group = child.id();
        let code = tokio::select! {
            client_there = &mut output => {
                if !client_there {
                    // Nobody reads the terminal any more.
                    kill_group(group);
                }
                child.wait().await
            }
            exited = child.wait() => {
                // What it printed last is still to be read; a process it left in the background
                // may hold the terminal open, but the exec is over.
                let _ = tokio::time::timeout(DRAIN, &mut output).await;
                exited
            }
            () = input => {
                // The client has left: nobody reads the terminal any more.
                kill_group(group);
                child.wait().await
            }
            () = container_gone => {
                kill_group(group);
                child.wait().await
            }
        };
        finish(session, exit_status(code.ok().map(exit_code))).await;
    });
    Ok(response)
}

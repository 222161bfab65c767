//! `exec -t`: a command on a pseudo-terminal. The agent opens a pty, starts the command with
//! the terminal end as its stdin, stdout and stderr, leading a session of its own with that
//! terminal as its controlling one (through `kplane exec-limited --tty`), and joins the
//! websocket to the pty's other end: channel 0 is typed into it, what the terminal shows goes
//! out on channel 1 (stdout and stderr are one stream on a terminal), and channel 4's
//! `{"Width":W,"Height":H}` resizes it, which signals the command with SIGWINCH.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use kplane_actors::agent::runtime::huge_pages;
use kplane_actors::agent::ExecTarget;
use rustix::pty::OpenptFlags;
use serde::Deserialize;
use tokio::io::unix::AsyncFd;

use super::debugging::{
    command, exit_status, finish, framed, next_message, not_started, upgrade, Upgraded,
    CLIENT_SETUP, CLOSE, PROTOCOLS, STDIN, STDOUT,
};
use super::http::AgentHttpError;

/// The channel of terminal sizes, from the client.
const RESIZE: u8 = 4;
/// How long the terminal is still read once the command has exited.
const DRAIN: Duration = Duration::from_secs(1);
/// What an end of typed input is on a terminal (Ctrl-D).
const END_OF_TRANSMISSION: u8 = 0x04;

/// A terminal size as the channel protocol sends it.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TerminalSize {
    width: u16,
    height: u16,
}

/// A pty: the side the agent reads and writes, and the terminal the command gets.
struct Pty {
    controller: OwnedFd,
    terminal: OwnedFd,
}

fn open_pty() -> std::io::Result<Pty> {
    // Close-on-exec: no command the agent starts may hold another's terminal.
    let controller =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&controller)?;
    rustix::pty::unlockpt(&controller)?;
    let name = rustix::pty::ptsname(&controller, Vec::new())?;
    let terminal = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    Ok(Pty { controller, terminal })
}

/// The pty's controlling side, read and written without blocking a thread: once it is
/// dropped (the exec over), the terminal hangs up, whatever still holds it.
struct Controller(AsyncFd<OwnedFd>);

impl Controller {
    fn new(fd: OwnedFd) -> std::io::Result<Self> {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
        // `AsyncFd::new` is deprecated for types whose descriptor may change under it (its
        // replacement, `register`, is unsafe); an OwnedFd keeps its descriptor until dropped.
        #[allow(deprecated)]
        let registered = AsyncFd::new(fd)?;
        Ok(Controller(registered))
    }

    /// What the terminal shows next; 0 once every holder of the terminal has closed it.
    async fn read(&self, buffer: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let mut ready = self.0.readable().await?;
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *buffer)?)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Types `bytes` into the terminal.
    async fn write_all(&self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let mut ready = self.0.writable().await?;
            if let Ok(written) = ready.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
                bytes = &bytes[written?..];
            }
        }
        Ok(())
    }

    fn resize(&self, size: TerminalSize) {
        let size = rustix::termios::Winsize {
            ws_row: size.height,
            ws_col: size.width,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let _ = rustix::termios::tcsetwinsize(self.0.get_ref(), size);
    }
}

/// The command line that runs `argv` in a session of its own on the terminal: this binary's
/// `exec-limited --tty`, through `/proc/self/exe`, which the forked agent still is, even when
/// the file has since been replaced by a newer build.
fn on_terminal(argv: &[String]) -> Vec<String> {
    let mut line: Vec<String> =
        ["/proc/self/exe", "exec-limited", "--tty", "--"].map(String::from).into();
    line.extend(argv.iter().cloned());
    line
}

/// Runs `argv` in `target`'s environment on a new pty, over the websocket `req` asks for.
pub async fn exec(
    mut target: ExecTarget,
    argv: Vec<String>,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, AgentHttpError> {
    if argv.is_empty() {
        return Err(AgentHttpError::BadRequest("a command is required".into()));
    }
    let failed = |e: std::io::Error| AgentHttpError::BadRequest(format!("exec {argv:?}: {e}"));
    let pty = open_pty().map_err(failed)?;
    if !target.env.iter().any(|(k, _)| k == "TERM") {
        // What container runtimes give a tty exec when the image sets none.
        target.env.push(("TERM".into(), "xterm".into()));
    }
    let mut command = command(&target, &on_terminal(&argv))?;
    let stdio = || pty.terminal.try_clone().map(Stdio::from);
    command.stdin(stdio().map_err(failed)?).stdout(stdio().map_err(failed)?);
    command.stderr(stdio().map_err(failed)?);
    let Upgraded { response, session, mut messages, .. } = upgrade(req, payload, PROTOCOLS)?;
    let spawned = huge_pages::spawn(&mut command);
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
            while let Some(data) = next_message(&mut messages).await {
                match data.first() {
                    Some(&STDIN) if controller.write_all(&data[1..]).await.is_err() => break,
                    Some(&STDIN) => {}
                    Some(&RESIZE) => {
                        if let Ok(size) = serde_json::from_slice::<TerminalSize>(&data[1..]) {
                            controller.resize(size);
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
        let code = tokio::select! {
            client_there = &mut output => {
                if !client_there {
                    // Nobody reads the terminal any more.
                    let _ = child.start_kill();
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
                let _ = child.start_kill();
                child.wait().await
            }
        };
        finish(session, exit_status(code.ok().and_then(|s| s.code()))).await;
    });
    Ok(response)
}

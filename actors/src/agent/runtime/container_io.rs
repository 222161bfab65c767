//! A running container's stdin and terminal, as `attach` reaches them (its spec's `stdin`,
//! `stdinOnce` and `tty`). The agent holds them while the container runs, as a container
//! runtime's shim does; an agent restart closes them: the container then reads the end of its
//! stdin, or its terminal hangs up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::{broadcast, Mutex};

use super::terminal::Controller;

/// How a container's stdin and output are wired: its spec's `stdin`, `stdinOnce` and `tty`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interactive {
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
}

/// The stdin and terminal of one running container.
#[derive(Debug)]
pub struct ContainerIo {
    interactive: Interactive,
    /// The write end of the container's stdin pipe (`stdin` without `tty`), until it is closed.
    pipe: Mutex<Option<pipe::Sender>>,
    terminal: Option<Terminal>,
    /// Set once the stdin pipe is closed: with `stdinOnce`, when the first attached client's
    /// input ends.
    closed: AtomicBool,
}

#[derive(Debug)]
struct Terminal {
    controller: Arc<Controller>,
    /// The relay of what the terminal shows: subscribed to by attached clients, and closed
    /// when the terminal is (held weakly: the relay's end closes every subscription).
    screen: broadcast::WeakSender<Bytes>,
}

/// Why input could not reach a container.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the container's stdin is closed")]
    Closed,
    #[error("writing to the container's stdin: {0}")]
    Io(#[from] std::io::Error),
}

impl ContainerIo {
    /// A container with a stdin pipe (or none: `stdin` false) and no terminal.
    pub fn piped(interactive: Interactive, stdin: Option<pipe::Sender>) -> Self {
        ContainerIo {
            interactive,
            pipe: Mutex::new(stdin),
            terminal: None,
            closed: AtomicBool::new(false),
        }
    }

    /// A container on a terminal, whose output the relay behind `screen` shows.
    pub fn on_terminal(
        interactive: Interactive,
        controller: Arc<Controller>,
        screen: broadcast::WeakSender<Bytes>,
    ) -> Self {
        ContainerIo {
            interactive,
            pipe: Mutex::new(None),
            terminal: Some(Terminal { controller, screen }),
            closed: AtomicBool::new(false),
        }
    }

    pub fn interactive(&self) -> Interactive {
        self.interactive
    }

    /// What the terminal shows from now on; `None` without a terminal, or once nothing holds
    /// it any more (the container has exited). The stream closes then too.
    pub fn screen(&self) -> Option<broadcast::Receiver<Bytes>> {
        self.terminal.as_ref().and_then(|t| t.screen.upgrade()).map(|relay| relay.subscribe())
    }

    /// Sends `bytes` to the container's stdin (typed into its terminal, with `tty`).
    pub async fn write(&self, bytes: &[u8]) -> Result<(), InputError> {
        if !self.interactive.stdin || self.closed.load(Ordering::Acquire) {
            return Err(InputError::Closed);
        }
        if let Some(terminal) = &self.terminal {
            return Ok(terminal.controller.write_all(bytes).await?);
        }
        let mut pipe = self.pipe.lock().await;
        let sender = pipe.as_mut().ok_or(InputError::Closed)?;
        Ok(sender.write_all(bytes).await?)
    }

    /// An attached client's input has ended (it closed its stdin, or left). With `stdinOnce`,
    /// a stdin pipe is closed for good. A terminal stays open for the next client, as
    /// containerd keeps it (`kubectl` then says how to attach again).
    pub async fn attached_input_ended(&self) {
        if !self.interactive.stdin_once
            || self.terminal.is_some()
            || self.closed.swap(true, Ordering::AcqRel)
        {
            return;
        }
        drop(self.pipe.lock().await.take());
    }

    /// Resizes the terminal (nothing without one).
    pub fn resize(&self, width: u16, height: u16) {
        if let Some(terminal) = &self.terminal {
            terminal.controller.resize(width, height);
        }
    }
}

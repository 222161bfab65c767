//! Pseudo-terminals: what a container with `tty: true` and `exec -t` run on. The agent keeps the
//! pty's controlling side (it reads what the terminal shows and types into it); the command
//! gets the terminal side as its stdin, stdout and stderr.

use std::os::fd::OwnedFd;

use rustix::pty::OpenptFlags;
use tokio::io::unix::AsyncFd;

/// A new pty: the side the agent reads and writes, and the terminal a command gets.
pub struct Pty {
    pub controller: OwnedFd,
    pub terminal: OwnedFd,
}

impl Pty {
    pub fn open() -> std::io::Result<Pty> {
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
}

/// A pty's controlling side, read and written without blocking a thread: once it is dropped,
/// the terminal hangs up, whatever still holds it.
#[derive(Debug)]
pub struct Controller(AsyncFd<OwnedFd>);

impl Controller {
    pub fn new(fd: OwnedFd) -> std::io::Result<Self> {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
        // `AsyncFd::new` is deprecated for types whose descriptor may change under it (its
        // replacement, `register`, is unsafe); an OwnedFd keeps its descriptor until dropped.
        #[allow(deprecated)]
        let registered = AsyncFd::new(fd)?;
        Ok(Controller(registered))
    }

    /// What the terminal shows next; 0 (or EIO) once every holder of the terminal has closed it.
    pub async fn read(&self, buffer: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let mut ready = self.0.readable().await?;
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *buffer)?)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Types `bytes` into the terminal.
    pub async fn write_all(&self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let mut ready = self.0.writable().await?;
            if let Ok(written) = ready.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
                bytes = &bytes[written?..];
            }
        }
        Ok(())
    }

    /// Sets the terminal's size, which signals its foreground processes with SIGWINCH.
    pub fn resize(&self, width: u16, height: u16) {
        let size =
            rustix::termios::Winsize { ws_row: height, ws_col: width, ws_xpixel: 0, ws_ypixel: 0 };
        let _ = rustix::termios::tcsetwinsize(self.0.get_ref(), size);
    }
}

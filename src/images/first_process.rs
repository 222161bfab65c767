//! `kplane exec-limited --exit-file FILE`: the container's first process stays, runs the
//! container's command as its child and notes how that ended in FILE before it exits the same
//! way, as a container shim keeps a container's exit status for a kubelet that restarts. An
//! agent that restarts finds the container still running and adopts it, but is not the
//! parent of its process: the note is how it learns the exit code (0, a `Never` pod that
//! succeeded) instead of an unknown end.
//!
//! Signals sent to this process (the agent's SIGTERM goes to the container's first process)
//! are passed on to the command; those a terminal sends its whole foreground group (Ctrl-C's
//! SIGINT, SIGQUIT, SIGTSTP), which the command has had already, are not, but a hang-up, which
//! reaches only the session's leader, is.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode};

use kplane_actors::agent::runtime::{exit_code, ExitNote, CANNOT_RUN};
use kplane_actors::model::now;
use nix::errno::Errno;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;

/// The signals passed on to the command. Blocked here (and read from a signalfd), so that
/// none stops or ends this process first; the child clears the mask before it becomes the
/// program.
const PASSED_ON: [Signal; 10] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
];

/// This binary, wherever the mount namespace has it.
const SELF: &str = "/proc/self/exe";

/// Runs `program` with `args` as a child, passes signals on to it until it ends, notes its
/// exit code in `note`, and exits with it (126 or 127 when it could not start, as an exec's
/// failure would).
pub fn run_noting_exit(program: &OsString, args: &[OsString], note: &Path) -> ExitCode {
    let mut handled = SigSet::empty();
    PASSED_ON.iter().chain([&Signal::SIGCHLD]).for_each(|signal| handled.add(*signal));
    if let Err(error) = handled.thread_block() {
        eprintln!("kplane exec-limited: blocking signals: {error}");
    }
    // Through `exec-limited` again, which clears the signal mask the child inherits (what is
    // passed on would stay pending) before it becomes the program, or reports why it cannot.
    let mut command = Command::new(SELF);
    command.args(["exec-limited".as_ref(), "--".as_ref(), program.as_os_str()]).args(args);
    let code = match command.spawn() {
        Ok(child) => supervise(child, &handled),
        Err(error) => {
            eprintln!("{CANNOT_RUN}{}: {error}", program.to_string_lossy());
            i32::from(super::exec_limited::exec_failure_code(&error))
        }
    };
    let noted = ExitNote { pid: std::process::id(), exit_code: code, finished_at: Some(now()) };
    if let Err(error) = noted.write(note) {
        eprintln!("kplane exec-limited: noting the exit in {}: {error}", note.display());
    }
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

/// Passes the signals this process is sent on to `child` until it has ended; its exit code.
fn supervise(mut child: std::process::Child, handled: &SigSet) -> i32 {
    let target = Pid::from_raw(child.id() as i32);
    let signals = SignalFd::with_flags(handled, SfdFlags::SFD_CLOEXEC);
    let signals = match signals {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("kplane exec-limited: reading signals: {error}");
            return child.wait().map_or(255, exit_code);
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return exit_code(status),
            Ok(None) => {}
            Err(_) => return 255,
        }
        // A SIGCHLD (blocked, so pending until read) wakes this after every change of the
        // child's; its end is taken above.
        let info = match signals.read_signal() {
            Ok(Some(info)) => info,
            Ok(None) | Err(Errno::EINTR) => continue,
            Err(error) => {
                eprintln!("kplane exec-limited: reading signals: {error}");
                return child.wait().map_or(255, exit_code);
            }
        };
        let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else { continue };
        if passed_on(signal, info.ssi_code) {
            let _ = kill(target, signal);
        }
    }
}

/// Whether `signal`, sent to this process with `code` (its `si_code`), is the command's to
/// hear from this process: not SIGCHLD, nor what a terminal sent the whole foreground group.
fn passed_on(signal: Signal, code: i32) -> bool {
    let from_the_terminal = code == nix::libc::SI_KERNEL && signal != Signal::SIGHUP;
    signal != Signal::SIGCHLD && !from_the_terminal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_sent_to_this_process_are_passed_on_but_not_a_terminal_s_to_its_group() {
        assert!(passed_on(Signal::SIGTERM, nix::libc::SI_USER));
        assert!(passed_on(Signal::SIGINT, nix::libc::SI_USER));
        assert!(!passed_on(Signal::SIGINT, nix::libc::SI_KERNEL), "Ctrl-C reached the command");
        assert!(!passed_on(Signal::SIGTSTP, nix::libc::SI_KERNEL));
        assert!(passed_on(Signal::SIGHUP, nix::libc::SI_KERNEL), "a hang-up reaches the leader");
        assert!(!passed_on(Signal::SIGCHLD, nix::libc::SI_USER));
    }
}

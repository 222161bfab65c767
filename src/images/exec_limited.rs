//! `kplane exec-limited [--cgroup-procs FILE]... [--oom-score-adj N] [--mount JSON]...
//! [--mounts-of FILE] [--hostname NAME | --uts-of FILE] [--memory-bytes N] [--max-open-files N]
//! [--tty] [--as UID:GID:GROUPS] [--exit-file FILE] -- PROGRAM [ARGS...]`:
//! joins control groups, sets its OOM score adjustment (what the kernel's OOM killer weighs,
//! -1000..=1000; where it cannot be lowered the score stays), binds volumes in a mount namespace of its own (or joins another
//! process's), takes a host name of its own (a new UTS namespace, as a container
//! runtime gives each pod) or joins another process's, and lowers this process's rlimits,
//! then replaces itself with PROGRAM, which inherits them. With `--tty`, PROGRAM also leads a new session whose controlling
//! terminal is its stdin (a pty's terminal end, as the agent gives `exec -t`), so that shells
//! get job control and Ctrl-C reaches them. With `--as`, PROGRAM runs as that user, group and
//! supplementary groups (a container's `securityContext`; empty parts stay as they are).
//! With `--exit-file`, it stays and runs PROGRAM as its child instead, noting its exit there
//! (`first_process.rs`).
//!
//! The node agent puts `[kplane, "exec-limited", "--memory-bytes", N, "--"]` in front of a
//! container's command when it has `resources.limits.memory`. These are per-process limits, not
//! a cgroup: children of PROGRAM get the same limits each, not a shared budget.
//!
//! Memory is `RLIMIT_DATA`, which on Linux >= 4.7 counts the heap and writable private mappings.
//! `RLIMIT_AS` would also count the address space glibc reserves for its malloc arenas (64 MiB
//! each) and the runtimes of Go or Java, which would fail long before using the memory.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use kplane_actors::agent::launch::Identity;
use kplane_actors::agent::runtime::CANNOT_RUN;
use kplane_actors::agent::volumes::Mount;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::unistd::{setgid, setgroups, setuid, Gid, Uid};

/// Exit code when the limits (or the terminal) cannot be applied (PROGRAM never started).
const LIMIT_FAILED: u8 = 125;
/// Exit code when PROGRAM exists but cannot be executed (as a shell would).
const NOT_EXECUTABLE: u8 = 126;
/// Exit code when PROGRAM is not found (as a shell would).
const NOT_FOUND: u8 = 127;

/// Flags of `kplane exec-limited`.
#[derive(clap::Args, Debug)]
pub struct ExecLimitedArgs {
    /// Join the control group whose `cgroup.procs` file this is (the node agent's runtime
    /// gives a container's), before anything else.
    #[arg(long = "cgroup-procs", value_name = "FILE")]
    cgroup_procs: Vec<std::path::PathBuf>,
    /// Set this process's `oom_score_adj` (the node agent gives a container its QoS class's).
    #[arg(long, value_name = "N", allow_negative_numbers = true,
        value_parser = clap::value_parser!(i64).range(-1000..=1000))]
    oom_score_adj: Option<i64>,
    /// Bind this volume (a [`Mount`] as JSON) in a mount namespace of its own, made at the
    /// first (needs CAP_SYS_ADMIN); missing targets are made on the node.
    #[arg(long = "mount", value_name = "JSON", value_parser = parse_mount, conflicts_with = "mounts_of")]
    mounts: Vec<Mount>,
    /// Join the mount namespace this file is of, `/proc/PID/ns/mnt`.
    #[arg(long, value_name = "FILE")]
    mounts_of: Option<std::path::PathBuf>,
    /// Take this host name, in a UTS namespace of its own (needs CAP_SYS_ADMIN).
    #[arg(long, value_name = "NAME", conflicts_with = "uts_of")]
    hostname: Option<String>,
    /// Join the UTS namespace (the host name) this file is of, `/proc/PID/ns/uts`.
    #[arg(long, value_name = "FILE")]
    uts_of: Option<std::path::PathBuf>,
    /// The host name the joined namespace is to have: wait until its process has given it
    /// (it makes the namespace, then names it).
    #[arg(long, value_name = "NAME", requires = "uts_of")]
    uts_hostname: Option<String>,
    /// Limit on the data segment and writable private mappings, in bytes (RLIMIT_DATA).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    memory_bytes: Option<u64>,
    /// Limit on open file descriptors (RLIMIT_NOFILE).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_open_files: Option<u64>,
    /// Start a new session with stdin, a terminal, as its controlling terminal.
    #[arg(long)]
    tty: bool,
    /// Run as this user, group and supplementary groups (`UID:GID:GROUP,GROUP`).
    #[arg(long = "as", value_name = "UID:GID:GROUPS", value_parser = parse_identity)]
    identity: Option<Identity>,
    /// Stay the container's first process: run PROGRAM as a child, pass on the signals this
    /// process is sent, and note how PROGRAM ended in this file before exiting the same way
    /// (see `first_process.rs`). Without it this process becomes PROGRAM.
    #[arg(long, value_name = "FILE")]
    exit_file: Option<std::path::PathBuf>,
    /// The program to run and its arguments, after `--`; found through PATH like a shell does.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

/// A limit the kernel refused.
#[derive(Debug, thiserror::Error)]
#[error("cannot set {resource}: {source}")]
struct LimitError {
    resource: &'static str,
    source: io::Error,
}

/// Names the `resource` an error (nix's, rustix's or the standard library's) refused.
fn failed<E: Into<io::Error>>(resource: &'static str) -> impl FnOnce(E) -> LimitError {
    move |error| LimitError { resource, source: error.into() }
}

/// Applies the limits and execs the program; returns only if that fails.
pub fn exec_limited(args: ExecLimitedArgs) -> ExitCode {
    if let Err(e) = apply_limits(&args) {
        eprintln!("kplane exec-limited: {e}");
        return ExitCode::from(LIMIT_FAILED);
    }
    let Some((program, rest)) = args.command.split_first() else {
        // clap requires at least one value; kept for the type's sake.
        eprintln!("kplane exec-limited: no program given after --");
        return ExitCode::from(NOT_FOUND);
    };
    if let Some(note) = &args.exit_file {
        return super::first_process::run_noting_exit(program, rest, note);
    }
    // The program starts with no signal blocked, whatever started this process (a first
    // process that stays blocks those it passes on).
    if let Err(error) = nix::sys::signal::SigSet::empty().thread_set_mask() {
        eprintln!("kplane exec-limited: clearing the signal mask: {error}");
        return ExitCode::from(LIMIT_FAILED);
    }
    let error = Command::new(program).args(rest).exec();
    eprintln!("{CANNOT_RUN}{}: {error}", program.to_string_lossy());
    ExitCode::from(exec_failure_code(&error))
}

fn apply_limits(args: &ExecLimitedArgs) -> Result<(), LimitError> {
    for file in &args.cgroup_procs {
        // `0`: the writing process.
        std::fs::write(file, "0").map_err(failed("a control group"))?;
    }
    if let Some(score) = args.oom_score_adj {
        // Lowering it takes privilege (CAP_SYS_RESOURCE, which some sandboxes withhold even
        // from root): without, the process keeps the score it has and runs all the same.
        let _ = std::fs::write("/proc/self/oom_score_adj", score.to_string());
    }
    // Before the host name: a process joining the container waits for its name, and then
    // finds its mounts all there.
    if !args.mounts.is_empty() {
        bind_all(&args.mounts).map_err(failed("the volume mounts"))?;
    }
    if let Some(name) = &args.hostname {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUTS)
            .map_err(failed("a UTS namespace"))?;
        nix::unistd::sethostname(name).map_err(failed("the host name"))?;
    }
    if let Some(file) = &args.uts_of {
        let uts = "the container's UTS namespace";
        let deadline = std::time::Instant::now() + NAMESPACE_PATIENCE;
        let namespace = own_namespace_of(file, "uts", deadline).map_err(failed(uts))?;
        nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWUTS).map_err(failed(uts))?;
        if let Some(name) = &args.uts_hostname {
            named(name, deadline).map_err(failed("the container's host name"))?;
        }
    }
    if let Some(file) = &args.mounts_of {
        let mounts = "the container's mount namespace";
        let deadline = std::time::Instant::now() + NAMESPACE_PATIENCE;
        let namespace = own_namespace_of(file, "mnt", deadline).map_err(failed(mounts))?;
        staying_in_place(|| nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNS))
            .map_err(failed(mounts))?;
    }
    if args.tty {
        rustix::process::setsid().map_err(failed("a new session"))?;
        rustix::process::ioctl_tiocsctty(std::io::stdin()).map_err(failed("a controlling tty"))?;
    }
    if let Some(bytes) = args.memory_bytes {
        lower(Resource::RLIMIT_DATA, "RLIMIT_DATA", bytes)?;
    }
    if let Some(files) = args.max_open_files {
        lower(Resource::RLIMIT_NOFILE, "RLIMIT_NOFILE", files)?;
    }
    if let Some(identity) = &args.identity {
        take_on(identity)?;
    }
    Ok(())
}

/// How long a process joining a container waits for the container to have made its own UTS
/// namespace and named it: one that has just started (a postStart hook runs at once) may not
/// have yet, and a hook that joined between the two steps saw the machine's name (a full test
/// run on a loaded machine caught that once). A probe's own timeout still bounds a probe.
const NAMESPACE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Opens the namespace `file` is of (`/proc/PID/ns/uts`; `kind` the same file's name), once it
/// is no longer this process's own: the container's process makes its namespace as its first
/// step.
fn own_namespace_of(
    file: &std::path::Path,
    kind: &str,
    deadline: std::time::Instant,
) -> io::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata(format!("/proc/self/ns/{kind}"))?.ino();
    loop {
        let namespace = std::fs::File::open(file)?;
        if namespace.metadata()?.ino() != ours {
            return Ok(namespace);
        }
        if std::time::Instant::now() >= deadline {
            let message =
                format!("{} is still the host's after {NAMESPACE_PATIENCE:?}", file.display());
            return Err(io::Error::new(io::ErrorKind::TimedOut, message));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Binds `mounts` (outer targets first) in a new mount namespace, which takes the node's mounts
/// as they come but sends none of its own back. A target that is not there is made (a
/// directory, or an empty file for a file), as a runtime makes it in an image.
fn bind_all(mounts: &[Mount]) -> io::Result<()> {
    use nix::mount::{mount, MsFlags};
    staying_in_place(|| -> io::Result<()> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
        mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_SLAVE, None::<&str>)?;
        for m in mounts {
            let context = |e: io::Error| {
                let what = format!("{} on {}: {e}", m.source.display(), m.target.display());
                io::Error::new(e.kind(), what)
            };
            make_target(m).map_err(context)?;
            let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
            mount(Some(&m.source), &m.target, None::<&str>, bind, None::<&str>)
                .map_err(|e| context(e.into()))?;
            if m.read_only {
                let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
                mount(None::<&str>, &m.target, None::<&str>, flags, None::<&str>)
                    .map_err(|e| context(e.into()))?;
            }
        }
        Ok(())
    })
}

/// Makes a mount's target when it is missing: a directory for a directory, else a file.
fn make_target(m: &Mount) -> io::Result<()> {
    if std::fs::symlink_metadata(&m.target).is_ok() {
        return Ok(());
    }
    if std::fs::metadata(&m.source)?.is_dir() {
        return std::fs::create_dir_all(&m.target);
    }
    if let Some(parent) = m.target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new().create(true).append(true).open(&m.target).map(|_| ())
}

/// Runs `change` (of the mount namespace) and goes back to the working directory by its path,
/// now resolved through the new mounts (a `workingDir` inside a volume is the volume's).
fn staying_in_place<E: Into<io::Error>>(change: impl FnOnce() -> Result<(), E>) -> io::Result<()> {
    let dir = std::env::current_dir();
    change().map_err(Into::into)?;
    if let Ok(dir) = dir {
        std::env::set_current_dir(dir)?;
    }
    Ok(())
}

fn parse_mount(text: &str) -> Result<Mount, String> {
    serde_json::from_str(text).map_err(|e| format!("{text:?} is not a mount: {e}"))
}

/// Waits until the UTS namespace this process is in has the host name `name` (its maker gives
/// it just after making the namespace).
fn named(name: &str, deadline: std::time::Instant) -> io::Result<()> {
    loop {
        if nix::unistd::gethostname()?.to_string_lossy() == name {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            let message = format!("not named {name} after {NAMESPACE_PATIENCE:?}");
            return Err(io::Error::new(io::ErrorKind::TimedOut, message));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Becomes `identity`: groups first, then the group, then the user (after which none of them
/// could change any more).
fn take_on(identity: &Identity) -> Result<(), LimitError> {
    if !identity.groups.is_empty() {
        let groups: Vec<Gid> = identity.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        setgroups(&groups).map_err(failed("the supplementary groups"))?;
    }
    if let Some(gid) = identity.gid {
        setgid(Gid::from_raw(gid)).map_err(failed("the group"))?;
    }
    if let Some(uid) = identity.uid {
        setuid(Uid::from_raw(uid)).map_err(failed("the user"))?;
    }
    Ok(())
}

fn parse_identity(text: &str) -> Result<Identity, String> {
    text.parse()
}

/// Sets both the soft and the hard limit, so PROGRAM cannot raise them again; never raises a
/// hard limit that is already lower (an unprivileged process could not anyway).
fn lower(resource: Resource, name: &'static str, limit: u64) -> Result<(), LimitError> {
    let (_, hard) = getrlimit(resource).map_err(failed(name))?;
    let value = limit.min(hard);
    setrlimit(resource, value, value).map_err(failed(name))
}

/// 127 when the program is missing, 126 when it is there but cannot run.
pub(super) fn exec_failure_code(error: &io::Error) -> u8 {
    if error.kind() == io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        NOT_EXECUTABLE
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ExecLimitedArgs,
    }

    fn parse(argv: &[&str]) -> Result<ExecLimitedArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("exec-limited").chain(argv.iter().copied()))
            .map(|cli| cli.args)
    }

    #[test]
    fn parses_limits_and_the_command_after_the_separator() {
        let args = parse(&["--memory-bytes", "1000000", "--", "sh", "-c", "ulimit -d"]).unwrap();
        assert_eq!(args.memory_bytes, Some(1_000_000));
        assert_eq!(args.max_open_files, None);
        assert_eq!(args.command, ["sh", "-c", "ulimit -d"]);
        assert!(!args.tty);
        assert!(parse(&["--tty", "--", "sh"]).unwrap().tty);
        let args = parse(&["--max-open-files=64", "--", "prog", "--memory-bytes", "1"]).unwrap();
        assert_eq!(args.max_open_files, Some(64));
        assert_eq!(args.memory_bytes, None, "flags after -- belong to the program");
    }

    #[test]
    fn parses_an_identity() {
        let args = parse(&["--as", "1000:3000:2000,3000", "--", "id"]).unwrap();
        let identity = args.identity.unwrap();
        assert_eq!(
            (identity.uid, identity.gid, identity.groups),
            (Some(1000), Some(3000), vec![2000, 3000])
        );
        assert_eq!(parse(&["--as", "::", "--", "id"]).unwrap().identity, Some(Identity::default()));
        assert!(parse(&["--as", "root", "--", "id"]).is_err());
        assert!(parse(&["--as", "1:2:x", "--", "id"]).is_err());
    }

    #[test]
    fn rejects_a_missing_command_and_bad_limits() {
        assert!(parse(&["--memory-bytes", "1"]).is_err());
        assert!(parse(&["--memory-bytes", "1", "sh"]).is_err(), "the program must follow --");
        assert!(parse(&["--memory-bytes", "0", "--", "sh"]).is_err());
        assert!(parse(&["--memory-bytes", "-5", "--", "sh"]).is_err());
        assert!(parse(&["--max-open-files", "many", "--", "sh"]).is_err());
    }

    #[test]
    fn exec_failures_map_to_shell_exit_codes() {
        assert_eq!(exec_failure_code(&io::Error::from(io::ErrorKind::NotFound)), 127);
        assert_eq!(exec_failure_code(&io::Error::from(io::ErrorKind::PermissionDenied)), 126);
    }
}

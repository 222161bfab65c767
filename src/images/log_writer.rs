//! `kplane log-writer [--stream stdout|stderr] FILE`: writes what it reads on stdin to FILE
//! (appending), a line at a time with the time it arrived and its stream, in the container log
//! format (`agent::log_lines`), until stdin ends. The node agent pipes a container's stdout
//! into one and its stderr into another, both appending whole lines to one file, as a
//! container runtime's shim does: a process of its own, so a container's output keeps being
//! written while the agent restarts, and the agent can show `--timestamps`, read `--since` and
//! attach to each stream apart. A log rotated (renamed, a new file made at its path) is
//! written at its path again from the next line on.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use kplane_actors::agent::log_lines::{self, Stream};

/// The longest part of a line written as one log line (as the kubelet's 16 KiB).
const MAX_LINE: usize = 16 * 1024;

/// Flags of `kplane log-writer`.
#[derive(clap::Args, Debug)]
pub struct LogWriterArgs {
    /// Which of the container's outputs stdin is.
    #[arg(long, value_enum, default_value = "stdout")]
    stream: StreamArg,
    /// The log file to append to.
    file: PathBuf,
}

/// `--stream`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum StreamArg {
    Stdout,
    Stderr,
}

/// Copies stdin to the log file until stdin ends; 1 when the file cannot be written.
pub fn log_writer(args: LogWriterArgs) -> ExitCode {
    let stream = match args.stream {
        StreamArg::Stdout => Stream::Stdout,
        StreamArg::Stderr => Stream::Stderr,
    };
    match copy(io::stdin().lock(), &args.file, stream) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kplane log-writer: {}: {e}", args.file.display());
            ExitCode::from(1)
        }
    }
}

fn copy(mut input: impl Read, file: &std::path::Path, stream: Stream) -> io::Result<()> {
    let open = || OpenOptions::new().create(true).append(true).open(file);
    let mut log = open()?;
    // Whole lines, appended at once, to the file at the path now (the one before while the
    // path cannot be opened: its directory removed, say, as its pod goes).
    let mut append = |out: &[u8]| {
        if rotated(&log, file) {
            if let Ok(now) = open() {
                log = now;
            }
        }
        log.write_all(out)
    };
    let mut buffer = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    loop {
        let read = match input.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let now = chrono::Utc::now();
        for &byte in &buffer[..read] {
            if byte == b'\n' {
                log_lines::write_line(now, &line, true, stream, &mut out);
                line.clear();
            } else {
                line.push(byte);
                if line.len() == MAX_LINE {
                    log_lines::write_line(now, &line, false, stream, &mut out);
                    line.clear();
                }
            }
        }
        // One write per read.
        append(&out)?;
        out.clear();
    }
    if !line.is_empty() {
        log_lines::write_line(chrono::Utc::now(), &line, false, stream, &mut out);
        append(&out)?;
    }
    Ok(())
}

/// Whether the file at `path` is no longer `log` (renamed away, another made there or not yet).
fn rotated(log: &std::fs::File, path: &std::path::Path) -> bool {
    match (std::fs::metadata(path), log.metadata()) {
        (Ok(at_path), Ok(ours)) => !log_lines::same_file(&at_path, &ours),
        (Err(_), _) => true,
        (_, Err(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_written_as_timed_lines_and_reads_back_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        let long = "x".repeat(MAX_LINE + 10);
        let output = format!("one\ntwo\n{long}\nlast");
        copy(output.as_bytes(), &file, Stream::Stdout).unwrap();
        copy(&b"oops\n"[..], &file, Stream::Stderr).unwrap();
        let written = std::fs::read(&file).unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&written).unwrap().lines().collect();
        assert_eq!(lines.len(), 6, "one, two, the long line in two parts, last, oops");
        assert!(lines[0].ends_with(" stdout F one"), "{}", lines[0]);
        assert!(lines[2].contains(" stdout P x"), "the long line's first part");
        assert!(lines[4].ends_with(" stdout P last"), "no newline at the end");
        assert!(lines[5].ends_with(" stderr F oops"), "{}", lines[5]);
        let read = log_lines::read_all(&written, false, None);
        assert_eq!(read, format!("{output}oops\n").as_bytes());
    }
}

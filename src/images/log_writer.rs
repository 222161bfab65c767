//! `kplane log-writer FILE`: writes what it reads on stdin to FILE (appending), a line at a
//! time with the time it arrived, in the container log format (`agent::log_lines`), until
//! stdin ends. The node agent pipes a container's stdout and stderr into one, as a container
//! runtime's shim does: it is a process of its own, so a container's output keeps being
//! written while the agent restarts, and the agent can show `--timestamps` and read `--since`.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use kplane_actors::agent::log_lines;

/// The longest part of a line written as one log line (as the kubelet's 16 KiB).
const MAX_LINE: usize = 16 * 1024;

/// Flags of `kplane log-writer`.
#[derive(clap::Args, Debug)]
pub struct LogWriterArgs {
    /// The log file to append to.
    file: PathBuf,
}

/// Copies stdin to the log file until stdin ends; 1 when the file cannot be written.
pub fn log_writer(args: LogWriterArgs) -> ExitCode {
    match copy(io::stdin().lock(), &args.file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kplane log-writer: {}: {e}", args.file.display());
            ExitCode::from(1)
        }
    }
}

fn copy(mut input: impl Read, file: &std::path::Path) -> io::Result<()> {
    let mut log = OpenOptions::new().create(true).append(true).open(file)?;
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
                log_lines::write_line(now, &line, true, &mut out);
                line.clear();
            } else {
                line.push(byte);
                if line.len() == MAX_LINE {
                    log_lines::write_line(now, &line, false, &mut out);
                    line.clear();
                }
            }
        }
        // One write per read: whole lines, appended at once.
        log.write_all(&out)?;
        out.clear();
    }
    if !line.is_empty() {
        log_lines::write_line(chrono::Utc::now(), &line, false, &mut out);
        log.write_all(&out)?;
    }
    Ok(())
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
        copy(output.as_bytes(), &file).unwrap();
        let written = std::fs::read(&file).unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&written).unwrap().lines().collect();
        assert_eq!(lines.len(), 5, "one, two, the long line in two parts, last");
        assert!(lines[0].ends_with(" stdout F one"), "{}", lines[0]);
        assert!(lines[2].contains(" stdout P x"), "the long line's first part");
        assert!(lines[4].ends_with(" stdout P last"), "no newline at the end");
        assert_eq!(log_lines::read_all(&written, false, None), output.as_bytes());
    }
}

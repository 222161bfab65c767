//! The container log format, as the kubelet's CRI logs: one line per line of output,
//! `<RFC 3339 time, nanoseconds> <stdout|stderr> <F|P> <content>`, where `F` ends a line and
//! `P` is part of one (a line longer than a write buffer, or the output's last bytes when they
//! end without a newline). The log writers (`kplane log-writer`, one per stream) write it; the
//! agent's log endpoints read it back, with or without the times, from a time on, both
//! streams as one (as `kubectl logs` shows them) or each on its own (as `attach` sends them).
//! A line not in this format (a log written without the writers) reads as it is, as stdout,
//! with no time.

use chrono::{DateTime, SecondsFormat, Utc};

/// Whether two files' metadata are of one file (its device and inode): how a log writer and a
/// follower of the log notice that it was rotated (renamed away, another made at its path).
pub fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

/// Which of a container's outputs a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// Its name in the log format (and in `kplane log-writer --stream`).
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Appends `content` (without its newline) as one line of `stream` written at `time`.
pub fn write_line(
    time: DateTime<Utc>,
    content: &[u8],
    complete: bool,
    stream: Stream,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(time.to_rfc3339_opts(SecondsFormat::Nanos, true).as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.name().as_bytes());
    out.extend_from_slice(if complete { b" F " } else { b" P " });
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// One line of a log file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogLine<'a> {
    time: Option<DateTime<Utc>>,
    stream: Stream,
    /// The output, without its newline.
    content: &'a [u8],
    /// Ends a line of output (it had a newline).
    complete: bool,
}

fn parse(line: &[u8]) -> LogLine<'_> {
    let raw = LogLine { time: None, stream: Stream::Stdout, content: line, complete: true };
    let mut fields = line.splitn(4, |b| *b == b' ');
    let (Some(time), Some(stream), Some(tag), Some(content)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return raw;
    };
    let time = std::str::from_utf8(time).ok().and_then(|t| DateTime::parse_from_rfc3339(t).ok());
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return raw,
    };
    match (time, tag) {
        (Some(time), b"F" | b"P") => {
            LogLine { time: Some(time.with_timezone(&Utc)), stream, content, complete: tag == b"F" }
        }
        _ => raw,
    }
}

/// Turns a log file's lines back into the container's output: with each line's time in front
/// (`timestamps`, as `kubectl logs --timestamps` shows it), and only from `since` on. Bytes
/// after the last newline are kept until more arrive (a file being written), or read as they
/// are by `finish`.
#[derive(Debug, Default)]
pub struct LogReader {
    timestamps: bool,
    since: Option<DateTime<Utc>>,
    pending: Vec<u8>,
    /// The last line read of each stream (stdout, stderr) was a part: its continuation gets
    /// no time of its own.
    in_line: [bool; 2],
}

impl LogReader {
    pub fn new(timestamps: bool, since: Option<DateTime<Utc>>) -> Self {
        Self { timestamps, since, ..Self::default() }
    }

    /// The output in `bytes` (the next bytes of the file), as far as its lines are whole, both
    /// streams as one.
    pub fn read(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.each_line(bytes, |_, rendered| out.extend_from_slice(rendered));
        out
    }

    /// As [`read`](Self::read), each stream's output apart: runs of one stream's lines, in
    /// the order they were written.
    pub fn read_by_stream(&mut self, bytes: &[u8]) -> Vec<(Stream, Vec<u8>)> {
        let mut runs: Vec<(Stream, Vec<u8>)> = Vec::new();
        self.each_line(bytes, |stream, rendered| match runs.last_mut() {
            Some((last, run)) if *last == stream => run.extend_from_slice(rendered),
            _ => runs.push((stream, rendered.to_vec())),
        });
        runs
    }

    fn each_line(&mut self, bytes: &[u8], mut emit: impl FnMut(Stream, &[u8])) {
        self.pending.extend_from_slice(bytes);
        let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') else { return };
        let rest = self.pending.split_off(end + 1);
        let whole = std::mem::replace(&mut self.pending, rest);
        let mut out = Vec::new();
        for line in whole[..whole.len() - 1].split(|b| *b == b'\n') {
            out.clear();
            let stream = self.render(line, &mut out);
            if !out.is_empty() {
                emit(stream, &out);
            }
        }
    }

    /// The output left: bytes after the last newline, read as one more line.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        if !rest.is_empty() {
            self.render(&rest, &mut out);
            if out.last() == Some(&b'\n') && rest.last() != Some(&b'\n') {
                out.pop();
            }
        }
        out
    }

    /// Renders one log line into `out`; returns its stream.
    fn render(&mut self, line: &[u8], out: &mut Vec<u8>) -> Stream {
        let line = parse(line);
        let in_line = &mut self.in_line[line.stream as usize];
        let continued = std::mem::replace(in_line, !line.complete);
        if let (Some(since), Some(time)) = (self.since, line.time) {
            if time < since {
                return line.stream;
            }
        }
        if self.timestamps && !continued {
            let time = line.time.unwrap_or(DateTime::<Utc>::UNIX_EPOCH);
            out.extend_from_slice(time.to_rfc3339_opts(SecondsFormat::Nanos, true).as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(line.content);
        if line.complete {
            out.push(b'\n');
        }
        line.stream
    }
}

/// Reads all of `bytes` (a whole log file).
pub fn read_all(bytes: &[u8], timestamps: bool, since: Option<DateTime<Utc>>) -> Vec<u8> {
    let mut reader = LogReader::new(timestamps, since);
    let mut out = reader.read(bytes);
    out.extend(reader.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-12-01T10:00:{second:02}.5Z"))
            .unwrap()
            .with_timezone(&Utc)
    }

    fn log() -> Vec<u8> {
        let mut log = Vec::new();
        write_line(at(1), b"first", true, Stream::Stdout, &mut log);
        write_line(at(2), b"sec", false, Stream::Stdout, &mut log);
        write_line(at(3), b"ond", true, Stream::Stdout, &mut log);
        write_line(at(4), b"no newline", false, Stream::Stdout, &mut log);
        log
    }

    #[test]
    fn output_comes_back_as_written() {
        assert_eq!(read_all(&log(), false, None), b"first\nsecond\nno newline");
        assert_eq!(
            String::from_utf8(read_all(&log(), true, None)).unwrap(),
            "2026-12-01T10:00:01.500000000Z first\n2026-12-01T10:00:02.500000000Z second\n\
             2026-12-01T10:00:04.500000000Z no newline"
        );
        assert_eq!(read_all(&log(), false, Some(at(3))), b"ond\nno newline");
    }

    #[test]
    fn lines_arriving_in_pieces_are_read_once_whole() {
        let log = log();
        let mut reader = LogReader::new(false, None);
        let (a, b) = log.split_at(10);
        assert_eq!(reader.read(a), b"");
        assert_eq!(reader.read(b), b"first\nsecond\nno newline");
        assert_eq!(reader.finish(), b"");
    }

    #[test]
    fn streams_read_as_one_or_apart() {
        let mut log = Vec::new();
        write_line(at(1), b"out ", false, Stream::Stdout, &mut log);
        write_line(at(2), b"err", true, Stream::Stderr, &mut log);
        write_line(at(3), b"one", true, Stream::Stdout, &mut log);
        write_line(at(4), b"two", true, Stream::Stdout, &mut log);
        assert!(String::from_utf8_lossy(&log).contains(" stderr F err\n"));
        assert_eq!(read_all(&log, false, None), b"out err\none\ntwo\n");
        // A part of one stream continues past the other's line: one time for it.
        let timed = String::from_utf8(read_all(&log, true, None)).unwrap();
        assert_eq!(timed.matches("2026-12-01").count(), 3, "{timed}");
        let mut reader = LogReader::new(false, None);
        assert_eq!(
            reader.read_by_stream(&log),
            [
                (Stream::Stdout, b"out ".to_vec()),
                (Stream::Stderr, b"err\n".to_vec()),
                (Stream::Stdout, b"one\ntwo\n".to_vec())
            ]
        );
    }

    #[test]
    fn lines_in_no_format_read_as_they_are() {
        assert_eq!(read_all(b"plain output\nmore", false, None), b"plain output\nmore");
        assert_eq!(read_all(b"a b c d\n", false, Some(at(1))), b"a b c d\n");
    }
}

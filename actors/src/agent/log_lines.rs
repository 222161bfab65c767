//! The container log format, as the kubelet's CRI logs: one line per line of output,
//! `<RFC 3339 time, nanoseconds> stdout <F|P> <content>`, where `F` ends a line and `P` is part
//! of one (a line longer than a write buffer, or the output's last bytes when they end without
//! a newline). The log writer (`kplane log-writer`) writes it; the agent's log endpoints read
//! it back, with or without the times, from a time on. A line not in this format (a log
//! written without the writer) reads as it is, with no time.

use chrono::{DateTime, SecondsFormat, Utc};

/// Appends `content` (without its newline) as one log line written at `time`.
pub fn write_line(time: DateTime<Utc>, content: &[u8], complete: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(time.to_rfc3339_opts(SecondsFormat::Nanos, true).as_bytes());
    out.extend_from_slice(if complete { b" stdout F " } else { b" stdout P " });
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// One line of a log file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogLine<'a> {
    time: Option<DateTime<Utc>>,
    /// The output, without its newline.
    content: &'a [u8],
    /// Ends a line of output (it had a newline).
    complete: bool,
}

fn parse(line: &[u8]) -> LogLine<'_> {
    let raw = LogLine { time: None, content: line, complete: true };
    let mut fields = line.splitn(4, |b| *b == b' ');
    let (Some(time), Some(stream), Some(tag), Some(content)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return raw;
    };
    let time = std::str::from_utf8(time).ok().and_then(|t| DateTime::parse_from_rfc3339(t).ok());
    match (time, stream, tag) {
        (Some(time), b"stdout" | b"stderr", b"F" | b"P") => {
            LogLine { time: Some(time.with_timezone(&Utc)), content, complete: tag == b"F" }
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
    /// The last line read was a part: its continuation gets no time of its own.
    in_line: bool,
}

impl LogReader {
    pub fn new(timestamps: bool, since: Option<DateTime<Utc>>) -> Self {
        Self { timestamps, since, ..Self::default() }
    }

    /// The output in `bytes` (the next bytes of the file), as far as its lines are whole.
    pub fn read(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(bytes);
        let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let rest = self.pending.split_off(end + 1);
        let whole = std::mem::replace(&mut self.pending, rest);
        let mut out = Vec::with_capacity(whole.len());
        for line in whole[..whole.len() - 1].split(|b| *b == b'\n') {
            self.render(line, &mut out);
        }
        out
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

    fn render(&mut self, line: &[u8], out: &mut Vec<u8>) {
        let line = parse(line);
        let continued = std::mem::replace(&mut self.in_line, !line.complete);
        if let (Some(since), Some(time)) = (self.since, line.time) {
            if time < since {
                return;
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
        write_line(at(1), b"first", true, &mut log);
        write_line(at(2), b"sec", false, &mut log);
        write_line(at(3), b"ond", true, &mut log);
        write_line(at(4), b"no newline", false, &mut log);
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
    fn lines_in_no_format_read_as_they_are() {
        assert_eq!(read_all(b"plain output\nmore", false, None), b"plain output\nmore");
        assert_eq!(read_all(b"a b c d\n", false, Some(at(1))), b"a b c d\n");
    }
}

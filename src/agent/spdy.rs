//! SPDY/3.1 framing, as much of it as kubectl's port-forward speaks (RFC-less: the SPDY/3
//! draft): frames cut from a byte stream as its pieces arrive, and header blocks compressed by
//! zlib over SPDY's fixed dictionary, with one compression context per direction that lives as
//! long as the connection. Flow control (WINDOW_UPDATE) is read and ignored, as the Go
//! implementation kubectl and the kubelet use does; so are SETTINGS, and HEADERS and a
//! client's SYN_REPLY once their header blocks are inflated.

use std::sync::LazyLock;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

const VERSION: u16 = 3;
/// A frame's length is 24 bits; a header block is held to this much once inflated, and a
/// control frame to this much as it comes.
const MOST_HEADER_BYTES: usize = 256 * 1024;
const FLAG_FIN: u8 = 0x01;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;

/// RST_STREAM's statuses: a frame that breaks the protocol (a stream opened twice), a
/// stream the receiver refuses, a stream given up.
pub const PROTOCOL_ERROR: u32 = 1;
pub const REFUSED_STREAM: u32 = 3;
pub const CANCEL: u32 = 5;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpdyError {
    #[error("SPDY version {0} is not spoken (only 3)")]
    Version(u16),
    #[error("a SPDY header block does not inflate: {0}")]
    Compression(String),
    #[error("a malformed SPDY {0} frame")]
    Malformed(&'static str),
}

/// A frame a client sends, as far as a server acts on it.
#[derive(Debug, PartialEq)]
pub enum Frame {
    Data {
        stream: u32,
        fin: bool,
        data: Bytes,
    },
    SynStream {
        stream: u32,
        fin: bool,
        headers: Vec<(String, String)>,
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    Ping(u32),
    GoAway,
    /// SETTINGS, WINDOW_UPDATE, HEADERS, a SYN_REPLY or a type this framer does not know.
    Ignored,
}

/// The SPDY/3 header-compression dictionary: the draft's list of words, each after its length
/// as four big-endian bytes, then a run of status codes, reasons, dates and media types.
static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TAIL: &str = concat!(
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417",
        "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently",
        "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error",
        "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct ",
        "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,",
        "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,",
        "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8",
        "charset=iso-8859-1,utf-,*,enq=0.",
    );
    let mut dictionary = Vec::with_capacity(1423);
    for word in WORDS {
        dictionary.put_u32(word.len() as u32);
        dictionary.extend_from_slice(word.as_bytes());
    }
    dictionary.extend_from_slice(TAIL.as_bytes());
    dictionary
});

/// Cuts frames out of the bytes a peer sends, in whatever pieces they arrive.
pub struct FrameReader {
    buffer: BytesMut,
    inflate: Decompress,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader { buffer: BytesMut::new(), inflate: Decompress::new(true) }
    }
}

impl FrameReader {
    /// Takes the next piece of the byte stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole frame, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SpdyError> {
        if self.buffer.len() < 8 {
            return Ok(None);
        }
        let length = u32::from_be_bytes([0, self.buffer[5], self.buffer[6], self.buffer[7]]);
        if self.buffer[0] & 0x80 != 0 && length as usize > MOST_HEADER_BYTES {
            return Err(SpdyError::Malformed("control (too large)"));
        }
        if self.buffer.len() < 8 + length as usize {
            return Ok(None);
        }
        let mut frame = self.buffer.split_to(8 + length as usize).freeze();
        let first = frame.get_u32();
        let flags = frame.get_u8();
        frame.advance(3);
        let fin = flags & FLAG_FIN != 0;
        if first & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data { stream: first, fin, data: frame }));
        }
        let version = ((first >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(SpdyError::Version(version));
        }
        let need = |frame: &Bytes, n: usize, name| {
            if frame.len() < n {
                Err(SpdyError::Malformed(name))
            } else {
                Ok(())
            }
        };
        Ok(Some(match (first & 0xffff) as u16 {
            SYN_STREAM => {
                need(&frame, 10, "SYN_STREAM")?;
                let stream = frame.get_u32() & 0x7fff_ffff;
                frame.advance(6); // the associated stream, the priority and the slot
                Frame::SynStream { stream, fin, headers: self.headers(&frame)? }
            }
            RST_STREAM => {
                need(&frame, 8, "RST_STREAM")?;
                Frame::RstStream { stream: frame.get_u32() & 0x7fff_ffff, status: frame.get_u32() }
            }
            PING => {
                need(&frame, 4, "PING")?;
                Frame::Ping(frame.get_u32())
            }
            GOAWAY => Frame::GoAway,
            // Their header blocks are inflated all the same: the compression context runs
            // through every block of the connection.
            SYN_REPLY | HEADERS => {
                need(&frame, 4, "SYN_REPLY or HEADERS")?;
                frame.advance(4);
                self.headers(&frame)?;
                Frame::Ignored
            }
            _ => Frame::Ignored,
        }))
    }

    /// A header block: inflated in the connection's one context, then `count` and each name
    /// and value after its length.
    fn headers(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
        let mut plain = Vec::with_capacity((block.len() * 4 + 64).min(MOST_HEADER_BYTES));
        let mut input = block;
        loop {
            if plain.capacity() - plain.len() < 256 {
                plain.reserve(plain.capacity().max(1024));
            }
            let before = self.inflate.total_in();
            let result = self.inflate.decompress_vec(input, &mut plain, FlushDecompress::Sync);
            input = &input[(self.inflate.total_in() - before) as usize..];
            match result {
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&DICTIONARY)
                        .map_err(|e| SpdyError::Compression(e.to_string()))?;
                }
                Err(e) => return Err(SpdyError::Compression(e.to_string())),
                Ok(Status::StreamEnd) => break,
                Ok(_) if input.is_empty() && plain.len() < plain.capacity() => break,
                Ok(_) => {}
            }
            if plain.len() > MOST_HEADER_BYTES {
                return Err(SpdyError::Malformed("header block (too large)"));
            }
        }
        let mut plain = Bytes::from(plain);
        let malformed = || SpdyError::Malformed("header block");
        let text = |plain: &mut Bytes| -> Result<String, SpdyError> {
            if plain.len() < 4 {
                return Err(malformed());
            }
            let length = plain.get_u32() as usize;
            if plain.len() < length {
                return Err(malformed());
            }
            String::from_utf8(plain.split_to(length).to_vec()).map_err(|_| malformed())
        };
        if plain.len() < 4 {
            return Err(malformed());
        }
        let count = plain.get_u32() as usize;
        let mut headers = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            let name = text(&mut plain)?;
            headers.push((name, text(&mut plain)?));
        }
        Ok(headers)
    }
}

/// Writes frames; holds the compression context of this side's header blocks.
pub struct FrameWriter {
    deflate: Compress,
}

impl Default for FrameWriter {
    fn default() -> Self {
        let mut deflate = Compress::new(Compression::default(), true);
        deflate.set_dictionary(&DICTIONARY).expect("a fresh deflate takes a dictionary");
        FrameWriter { deflate }
    }
}

impl FrameWriter {
    pub fn syn_reply(&mut self, stream: u32, headers: &[(&str, &str)]) -> Bytes {
        let mut payload = BytesMut::new();
        payload.put_u32(stream);
        payload.extend_from_slice(&self.header_block(headers));
        control(SYN_REPLY, 0, &payload)
    }

    /// A SYN_STREAM, as a client opens a stream (the server's side opens none).
    #[cfg(test)]
    pub fn syn_stream(&mut self, stream: u32, headers: &[(&str, &str)]) -> Bytes {
        let mut payload = BytesMut::new();
        payload.put_u32(stream);
        payload.put_u32(0);
        payload.put_u16(0);
        payload.extend_from_slice(&self.header_block(headers));
        control(SYN_STREAM, 0, &payload)
    }

    fn header_block(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
        let mut plain = BytesMut::new();
        plain.put_u32(headers.len() as u32);
        for (name, value) in headers {
            for text in [name, value] {
                plain.put_u32(text.len() as u32);
                plain.extend_from_slice(text.as_bytes());
            }
        }
        let mut block = Vec::with_capacity(plain.len() + 64);
        let mut input = &plain[..];
        loop {
            if block.capacity() - block.len() < 64 {
                block.reserve(block.capacity().max(256));
            }
            let before = self.deflate.total_in();
            self.deflate
                .compress_vec(input, &mut block, FlushCompress::Sync)
                .expect("deflating into a growing buffer does not fail");
            input = &input[(self.deflate.total_in() - before) as usize..];
            // A sync flush is complete once it leaves room unused.
            if input.is_empty() && block.len() < block.capacity() {
                return block;
            }
        }
    }
}

pub fn data(stream: u32, fin: bool, payload: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(8 + payload.len());
    frame.put_u32(stream & 0x7fff_ffff);
    frame.put_u8(if fin { FLAG_FIN } else { 0 });
    frame.put_uint(payload.len() as u64, 3);
    frame.extend_from_slice(payload);
    frame.freeze()
}

pub fn rst_stream(stream: u32, status: u32) -> Bytes {
    let mut payload = [0u8; 8];
    payload[..4].copy_from_slice(&stream.to_be_bytes());
    payload[4..].copy_from_slice(&status.to_be_bytes());
    control(RST_STREAM, 0, &payload)
}

pub fn ping(id: u32) -> Bytes {
    control(PING, 0, &id.to_be_bytes())
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(8 + payload.len());
    frame.put_u16(0x8000 | VERSION);
    frame.put_u16(kind);
    frame.put_u8(flags);
    frame.put_uint(payload.len() as u64, 3);
    frame.extend_from_slice(payload);
    frame.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(reader: &mut FrameReader, bytes: &[u8], piece: usize) -> Vec<Frame> {
        let mut frames = Vec::new();
        for chunk in bytes.chunks(piece) {
            reader.push(chunk);
            while let Some(frame) = reader.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        frames
    }

    #[test]
    fn the_dictionary_is_the_drafts_1423_bytes() {
        assert_eq!(DICTIONARY.len(), 1423);
        assert_eq!(&DICTIONARY[..11], b"\0\0\0\x07options");
        assert!(DICTIONARY.ends_with(b"utf-,*,enq=0."));
    }

    #[test]
    fn frames_are_cut_from_a_stream_in_any_pieces() {
        // Two connections' worth of header blocks through one context each way: the second
        // block of a connection refers back to the first.
        let mut client = FrameWriter::default();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(
            &client.syn_stream(1, &[("streamtype", "error"), ("port", "80"), ("requestid", "0")]),
        );
        bytes.extend_from_slice(&data(1, true, b""));
        bytes.extend_from_slice(
            &client.syn_stream(3, &[("streamtype", "data"), ("port", "80"), ("requestid", "0")]),
        );
        bytes.extend_from_slice(&data(3, false, b"GET / HTTP/1.1\r\n\r\n"));
        bytes.extend_from_slice(&ping(7));
        bytes.extend_from_slice(&rst_stream(3, 5));
        for piece in [1, 3, 7, 1000] {
            let frames = read_all(&mut FrameReader::default(), &bytes, piece);
            let header = |t: &str| {
                vec![
                    ("streamtype".to_string(), t.to_string()),
                    ("port".into(), "80".into()),
                    ("requestid".into(), "0".into()),
                ]
            };
            assert_eq!(
                frames,
                vec![
                    Frame::SynStream { stream: 1, fin: false, headers: header("error") },
                    Frame::Data { stream: 1, fin: true, data: Bytes::new() },
                    Frame::SynStream { stream: 3, fin: false, headers: header("data") },
                    Frame::Data {
                        stream: 3,
                        fin: false,
                        data: Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n")
                    },
                    Frame::Ping(7),
                    Frame::RstStream { stream: 3, status: 5 },
                ],
                "in pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_server_reply_reads_back_and_bad_input_is_an_error() {
        let mut server = FrameWriter::default();
        let reply = server.syn_reply(1, &[]);
        assert_eq!(&reply[..4], &[0x80, 0x03, 0x00, 0x02]);
        assert_eq!(FrameReader::default().next_frame(), Ok(None));
        let mut reader = FrameReader::default();
        reader.push(&reply);
        assert_eq!(reader.next_frame(), Ok(Some(Frame::Ignored)));
        // The reply's block went through the reader's context: the next one still inflates.
        reader.push(&server.syn_reply(3, &[("a", "b")]));
        assert_eq!(reader.next_frame(), Ok(Some(Frame::Ignored)));
        let mut huge = FrameReader::default();
        huge.push(&[0x80, 0x03, 0x00, 0x01, 0, 0x10, 0, 0]);
        assert_eq!(huge.next_frame(), Err(SpdyError::Malformed("control (too large)")));

        let mut old = FrameReader::default();
        old.push(&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1]);
        assert_eq!(old.next_frame(), Err(SpdyError::Version(2)));
        let mut garbled = FrameReader::default();
        garbled.push(&control(SYN_STREAM, 0, &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]));
        assert!(matches!(garbled.next_frame(), Err(SpdyError::Compression(_))));
        let mut short = FrameReader::default();
        short.push(&control(PING, 0, &[1]));
        assert_eq!(short.next_frame(), Err(SpdyError::Malformed("PING")));
    }
}

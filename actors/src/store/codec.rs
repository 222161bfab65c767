//! The on-disk encoding of stored values: the only file that uses bincode.
//!
//! Every value starts with a format-version byte, then a bincode 2 envelope around the object's
//! JSON bytes. New formats get a new version byte; old ones stay decodable.

use bincode::{BorrowDecode, Encode};

use super::StoreError;

/// The format written by this build.
const FORMAT_V1: u8 = 1;

/// bincode's own derives, not serde's: they write the JSON bytes with one copy, where serde
/// would pass them through the encoder one byte at a time.
#[derive(Encode, BorrowDecode)]
struct EnvelopeV1<'a> {
    resource_version: u64,
    json: &'a [u8],
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Appends the encoding of an object's resourceVersion and JSON bytes to `out`.
pub(crate) fn encode_object(out: &mut Vec<u8>, resource_version: u64, json: &[u8]) {
    out.reserve(json.len() + 24);
    out.push(FORMAT_V1);
    let envelope = EnvelopeV1 { resource_version, json };
    bincode::encode_into_std_write(&envelope, out, config())
        .expect("encoding into a Vec cannot fail");
}

/// Decodes what `encode_object` (of this or an older build) wrote.
pub(crate) fn decode_object(bytes: &[u8]) -> Result<(u64, &[u8]), StoreError> {
    match bytes.split_first() {
        Some((&FORMAT_V1, body)) => {
            let (envelope, _): (EnvelopeV1, usize) =
                bincode::borrow_decode_from_slice(body, config())
                    .map_err(|e| StoreError::Corrupt(format!("bad object envelope: {e}")))?;
            Ok((envelope.resource_version, envelope.json))
        }
        Some((version, _)) => {
            Err(StoreError::Corrupt(format!("unknown object format version {version}")))
        }
        None => Err(StoreError::Corrupt("empty stored value".into())),
    }
}

/// Appends the encoding of the revision counter's high-water mark to `out`.
pub(crate) fn encode_revision(out: &mut Vec<u8>, revision: u64) {
    out.push(FORMAT_V1);
    bincode::encode_into_std_write(revision, out, config())
        .expect("encoding into a Vec cannot fail");
}

pub(crate) fn decode_revision(bytes: &[u8]) -> Result<u64, StoreError> {
    match bytes.split_first() {
        Some((&FORMAT_V1, body)) => bincode::decode_from_slice(body, config())
            .map(|(rev, _)| rev)
            .map_err(|e| StoreError::Corrupt(format!("bad revision record: {e}"))),
        _ => Err(StoreError::Corrupt("bad revision record".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        // Encodings append: a writer puts a whole batch into one buffer.
        let mut buffer = b"key".to_vec();
        encode_object(&mut buffer, 7, br#"{"a":1}"#);
        let object = buffer.len();
        encode_revision(&mut buffer, 123_456);
        assert_eq!(decode_object(&buffer[3..object]).unwrap(), (7, &br#"{"a":1}"#[..]));
        assert_eq!(decode_revision(&buffer[object..]).unwrap(), 123_456);
    }

    /// Bytes as the first build wrote them: they must stay readable forever.
    #[test]
    fn decodes_format_v1_written_by_an_older_build() {
        let written = [1u8, 42, 2, b'{', b'}'];
        assert_eq!(decode_object(&written).unwrap(), (42, &b"{}"[..]));
        assert_eq!(decode_revision(&[1, 251, 0x10, 0x27]).unwrap(), 10_000);
    }

    #[test]
    fn rejects_garbage() {
        assert!(decode_object(&[]).is_err());
        assert!(decode_object(&[9, 1, 2]).is_err());
        assert!(decode_object(&[1, 255]).is_err());
        assert!(decode_revision(&[2]).is_err());
    }
}

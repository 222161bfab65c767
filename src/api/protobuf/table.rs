//! The shape of the generated field table (`fields.rs`): what the decoder knows of a message.

/// A protobuf message kplane decodes, by its OpenAPI name (`io.k8s.api.core.v1.PodSpec`).
pub(super) struct Message {
    pub name: &'static str,
    /// Sorted by tag.
    pub fields: &'static [Field],
}

pub(super) struct Field {
    pub tag: u32,
    /// The JSON name; empty for a Go embedded struct, whose fields are its parent's in JSON.
    pub json: &'static str,
    pub repeated: bool,
    pub kind: Kind,
}

#[derive(Clone, Copy)]
pub(super) enum Kind {
    String,
    Bool,
    /// int32 or int64: a varint either way.
    Int,
    /// Go's `[]byte`, base64 in JSON.
    Bytes,
    /// Another message, by its index in `MESSAGES`.
    Message(usize),
    MapOfString,
    MapOfBytes,
    MapOfMessage(usize),
}

impl Message {
    pub(super) fn field(&self, tag: u32) -> Option<&Field> {
        self.fields.binary_search_by_key(&tag, |f| f.tag).ok().map(|i| &self.fields[i])
    }
}

/// The message named `name`, by its index in `MESSAGES`.
pub(super) fn find(name: &str) -> Option<usize> {
    super::fields::MESSAGES.binary_search_by(|m| m.name.cmp(name)).ok()
}

//! Request bodies: size limit, content types (JSON, YAML, protobuf), repeated JSON fields and
//! strict field validation.

use actix_web::{web, HttpRequest};
use futures::StreamExt;
use kplane_actors::core::{unknown_field_message, PatchType};
use kplane_actors::model::ResourceType;
use serde::de::DeserializeSeed as _;
use serde_json::Value;

use super::openapi::{check_fields, check_fields_as, Empty, Unknown};
use crate::error::{HttpError, OBJECT_MEDIA_TYPES};

/// How long a request's body may take to arrive, as kube-apiserver's request timeout: a
/// client that trickles it in would otherwise hold its in-flight slot for as long as it likes.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads the whole body, refusing more than `limit` bytes with 413, and one that takes longer
/// than `BODY_TIMEOUT` to arrive with 504.
pub async fn read(payload: web::Payload, limit: usize) -> Result<web::Bytes, HttpError> {
    read_within(payload, limit, BODY_TIMEOUT).await
}

async fn read_within(
    mut payload: impl futures::Stream<Item = Result<web::Bytes, actix_web::error::PayloadError>> + Unpin,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<web::Bytes, HttpError> {
    let whole = async {
        let mut body = web::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk?;
            if body.len() + chunk.len() > limit {
                return Err(HttpError::TooLarge(limit));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    tokio::time::timeout(timeout, whole).await.map_err(|_| HttpError::Timeout)?
}

/// The media type of the request body without parameters; a missing or empty one means JSON.
/// A header that names no media type (`;charset=utf-8`) is returned whole, which no decoder
/// takes (415, as Kubernetes answers a type it cannot parse).
pub fn content_type(req: &HttpRequest) -> String {
    let header = req.headers().get(actix_web::http::header::CONTENT_TYPE);
    let header = header.map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string());
    match header {
        None => "application/json".into(),
        Some(header) if header.is_empty() => "application/json".into(),
        Some(header) => match header.split(';').next().unwrap_or("").trim() {
            "" => header,
            media_type => media_type.to_ascii_lowercase(),
        },
    }
}

/// Decodes an object body (create, update, a delete's options) as JSON, YAML or Kubernetes
/// protobuf, as its Content-Type says (none means JSON).
pub fn decode_object(req: &HttpRequest, bytes: &[u8]) -> Result<Value, HttpError> {
    decode_noting_duplicates(req, bytes).map(|(object, _)| object)
}

/// As [`decode_object`], with the paths of the fields a JSON body repeats (decoded as
/// Kubernetes' decoder decodes them), for [`FieldValidation::check`].
pub fn decode_noting_duplicates(
    req: &HttpRequest,
    bytes: &[u8],
) -> Result<(Value, Vec<String>), HttpError> {
    match content_type(req).as_str() {
        "application/json" => parse_json_noting_duplicates(bytes),
        "application/yaml" => parse_yaml_noting_duplicates(bytes),
        "application/vnd.kubernetes.protobuf" => super::protobuf::decode(bytes)
            .map(|object| (object, Vec::new()))
            .map_err(|e| HttpError::BadRequest(format!("decoding protobuf body: {e}"))),
        _ => Err(HttpError::UnsupportedMediaType(OBJECT_MEDIA_TYPES)),
    }
}

/// Parses JSON, naming where it broke.
pub fn parse_json(bytes: &[u8]) -> Result<Value, HttpError> {
    parse_json_noting_duplicates(bytes).map(|(value, _)| value)
}

/// Parses JSON as [`parse_json`] does, noting the paths of repeated fields
/// (`metadata.name`, `spec.containers[0].image`).
pub fn parse_json_noting_duplicates(bytes: &[u8]) -> Result<(Value, Vec<String>), HttpError> {
    parse_json_with(bytes, false)
}

/// Parses a patch's JSON as Kubernetes' patch handler decodes it when `fieldValidation` asks
/// (Strict or Warn), with its findings in the handler's words, to be refused or warned about
/// before the patched object's own: a field a merge patch repeats (decoded into a map, the last
/// one wins), and in a JSON patch, an operation's member other than `op`, `path`, `from` and
/// `value`, or one repeated (`json patch unknown field "[0].foo"`).
pub fn parse_patch(patch_type: PatchType, bytes: &[u8]) -> Result<(Value, Vec<String>), HttpError> {
    let (patch, duplicates) = parse_json_with(bytes, true)?;
    let duplicated = |path: &String| format!("duplicate field \"{path}\"");
    if patch_type != PatchType::Json {
        return Ok((patch, duplicates.iter().map(duplicated).collect()));
    }
    // Kubernetes decodes the operations one by one: each one's findings before the next's
    // (a repeated member's path starts with its operation's index: `[1].path`).
    let operation_of = |path: &str| {
        let index = path.strip_prefix('[').and_then(|rest| rest.split_once(']'));
        index.and_then(|(index, _)| index.parse().ok()).unwrap_or(usize::MAX)
    };
    let mut findings: Vec<(usize, String)> =
        duplicates.iter().map(|path| (operation_of(path), duplicated(path))).collect();
    let operations = patch.as_array().map(Vec::as_slice).unwrap_or_default();
    for (index, operation) in operations.iter().enumerate() {
        let members = operation.as_object().into_iter().flat_map(|members| members.keys());
        for member in members.filter(|m| !matches!(m.as_str(), "op" | "path" | "from" | "value")) {
            findings.push((index, format!("unknown field \"[{index}].{member}\"")));
        }
    }
    findings.sort_by_key(|(index, _)| *index);
    let findings = findings.into_iter().map(|(_, finding)| format!("json patch {finding}"));
    Ok((patch, findings.collect()))
}

fn parse_json_with(bytes: &[u8], last_wins: bool) -> Result<(Value, Vec<String>), HttpError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(HttpError::BadRequest("the request body is empty".into()));
    }
    // Bytes that are not UTF-8 are read as U+FFFD, as Go's JSON decoder reads them.
    let lossy;
    let bytes = match std::str::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(_) => {
            lossy = String::from_utf8_lossy(bytes).into_owned();
            lossy.as_bytes()
        }
    };
    let mut duplicates = Vec::new();
    let mut decoder = serde_json::Deserializer::from_slice(bytes);
    let parsed = ValueSeed { at: &Step::Root, duplicates: &mut duplicates, last_wins }
        .deserialize(&mut decoder)
        .and_then(|value| decoder.end().map(|()| value));
    let value = parsed.map_err(|e| {
        HttpError::BadRequest(format!("the body of the request could not be decoded as JSON: {e}"))
    })?;
    Ok((value, duplicates))
}

/// Where in a JSON document a value is: a chain of steps up to the root, kept on the stack
/// as the parse goes, so that only a repeated field costs a path.
enum Step<'a> {
    Root,
    Field(&'a str, &'a Step<'a>),
    Item(usize, &'a Step<'a>),
}

impl Step<'_> {
    fn path(&self) -> String {
        match self {
            Step::Root => String::new(),
            Step::Field(name, Step::Root) => (*name).to_string(),
            Step::Field(name, parent) => format!("{}.{name}", parent.path()),
            Step::Item(index, parent) => format!("{}[{index}]", parent.path()),
        }
    }
}

/// Builds a JSON value as serde_json's own does, noting each field an object repeats and
/// decoding it over the first (see `merge_repeated`), or, for YAML (`last_wins`), replacing
/// it, as Kubernetes' YAML-to-JSON conversion does.
struct ValueSeed<'a, 'p> {
    at: &'p Step<'p>,
    duplicates: &'a mut Vec<String>,
    last_wins: bool,
}

impl ValueSeed<'_, '_> {
    /// The seed of the value at `at`, within this one.
    fn within<'s, 'q>(&'s mut self, at: &'q Step<'q>) -> ValueSeed<'s, 'q> {
        ValueSeed { at, duplicates: &mut *self.duplicates, last_wins: self.last_wins }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, decoder: D) -> Result<Value, D::Error> {
        decoder.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    /// A YAML `.nan` or `.inf` has no JSON form: refused, as Go's JSON encoder refuses it
    /// when Kubernetes turns YAML into JSON (`json: unsupported value: NaN`).
    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Value, E> {
        let unsupported = || {
            let printed = match value {
                v if v.is_nan() => "NaN",
                v if v > 0.0 => "+Inf",
                _ => "-Inf",
            };
            E::custom(format!("json: unsupported value: {printed}"))
        };
        serde_json::Number::from_f64(value).map(Value::Number).ok_or_else(unsupported)
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut items: A) -> Result<Value, A::Error> {
        let mut values = Vec::with_capacity(items.size_hint().unwrap_or(0));
        loop {
            let at = Step::Item(values.len(), self.at);
            match items.next_element_seed(self.within(&at))? {
                Some(value) => values.push(value),
                None => return Ok(Value::Array(values)),
            }
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut fields: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(name) = fields.next_key::<String>()? {
            let at = Step::Field(&name, self.at);
            let value = fields.next_value_seed(self.within(&at))?;
            match object.entry(name) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                serde_json::map::Entry::Occupied(mut slot) => {
                    self.duplicates.push(Step::Field(slot.key(), self.at).path());
                    if self.last_wins {
                        slot.insert(value);
                    } else {
                        merge_repeated(slot.get_mut(), value);
                    }
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// Decodes a repeated field over the first as Go's decoder does: an object into the one
/// already there (its other fields stay), anything else replacing it.
fn merge_repeated(first: &mut Value, repeated: Value) {
    match (first, repeated) {
        (Value::Object(fields), Value::Object(repeated)) => {
            for (name, value) in repeated {
                match fields.get_mut(&name) {
                    Some(existing) => merge_repeated(existing, value),
                    None => {
                        fields.insert(name, value);
                    }
                }
            }
        }
        (first, repeated) => *first = repeated,
    }
}

/// The deepest YAML flow nesting (`[`, `{`) a body may have. The YAML parser reads a whole
/// document before its own depth limit (128) applies, in time that grows with the square of
/// the nesting: 50,000 levels in 100 KB held a worker for ten seconds.
const MAX_YAML_FLOW_DEPTH: usize = 1_000;

/// How deep YAML flow collections (`[`, `{`) nest in `bytes`, read as the YAML parser reads
/// them where it matters: brackets and quotes count only where they are indicators (in a flow
/// collection, or where a value starts), and quoted scalars, comments and block scalars are
/// stepped over. What it is unsure of counts as an indicator, which can only count deeper.
fn flow_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    // This line so far: only blanks (`line_start`), its indentation, the last byte that was
    // not a blank, whether a blank came after it, and the first byte of the last word.
    let (mut line_start, mut indent) = (true, 0usize);
    let (mut last, mut after_blank, mut word_first) = (0u8, true, 0u8);
    // The last scalar was quoted (`"a":"b"`, JSON's way, puts a value right after its `:`).
    let mut last_quoted = false;
    while i < bytes.len() {
        let c = bytes[i];
        let tagged = after_blank && matches!(word_first, b'!' | b'&');
        let value_start =
            line_start || tagged || (after_blank && matches!(last, b':' | b'-' | b'?'));
        let in_flow = depth > 0;
        match c {
            b'\n' => {
                (line_start, indent, last, after_blank, word_first) = (true, 0, 0, true, 0);
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                if line_start {
                    indent += 1;
                }
                after_blank = true;
                i += 1;
                continue;
            }
            b'#' if after_blank => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\''
                if (in_flow
                    && (matches!(last, b'[' | b'{' | b',')
                        || (last == b':' && (after_blank || last_quoted))
                        || (last == b'?' && after_blank)
                        || tagged))
                    || (!in_flow && value_start) =>
            {
                i = quoted_end(bytes, i);
                (last, after_blank, line_start, last_quoted) = (c, false, false, true);
                continue;
            }
            b'|' | b'>' if !in_flow && value_start => {
                // A block scalar: its lines are the blank ones and those indented deeper.
                i = line_end(bytes, i);
                while i < bytes.len() {
                    let line = i + 1;
                    let rest = &bytes[line.min(bytes.len())..];
                    let blanks = rest.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
                    let blank_line = matches!(rest.get(blanks), None | Some(b'\n' | b'\r'));
                    if !(blank_line || blanks > indent) {
                        break;
                    }
                    i = line_end(bytes, line);
                }
                continue;
            }
            b'[' | b'{' if in_flow || value_start => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' if in_flow => depth -= 1,
            _ => {}
        }
        if after_blank || matches!(last, b'[' | b'{' | b',') {
            word_first = c;
        }
        // A `:` right after a quoted key keeps the mark: the value may follow it at once.
        last_quoted = c == b':' && last_quoted && !after_blank;
        (last, after_blank, line_start) = (c, false, false);
        i += 1;
    }
    deepest
}

/// Where the line holding `from` ends (its newline, or the end).
fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from.min(bytes.len())..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |n| from + n)
}

/// Where the quoted scalar starting at `start` ends (just after its closing quote).
fn quoted_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => i += 2,
            b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Parses a YAML object body as [`parse_yaml`] does, noting the paths of the keys a mapping
/// repeats (the last one wins), for `fieldValidation` to refuse or warn about.
pub fn parse_yaml_noting_duplicates(bytes: &[u8]) -> Result<(Value, Vec<String>), HttpError> {
    if let Ok(parsed) = parse_json_noting_duplicates(bytes) {
        return Ok(parsed);
    }
    parseable_yaml(bytes)?;
    let mut duplicates = Vec::new();
    let decoder = serde_yaml::Deserializer::from_slice(bytes);
    let seed = ValueSeed { at: &Step::Root, duplicates: &mut duplicates, last_wins: true };
    let value = seed.deserialize(decoder).map_err(|e| {
        HttpError::BadRequest(format!("the body of the request could not be decoded as YAML: {e}"))
    })?;
    Ok((value, duplicates))
}

/// Parses a YAML document (an apply patch; JSON is YAML too) into its JSON value.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value, HttpError> {
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    parseable_yaml(bytes)?;
    let decoder = serde_yaml::Deserializer::from_slice(bytes);
    let mut repeated = Vec::new();
    let seed = ValueSeed { at: &Step::Root, duplicates: &mut repeated, last_wins: true };
    seed.deserialize(decoder).map_err(|e| {
        HttpError::BadRequest(format!("the body of the request could not be decoded as YAML: {e}"))
    })
}

/// Refuses what the YAML parser should not be given: an empty body, or one nested too deep.
fn parseable_yaml(bytes: &[u8]) -> Result<(), HttpError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(HttpError::BadRequest("the request body is empty".into()));
    }
    if flow_depth(bytes) > MAX_YAML_FLOW_DEPTH {
        return Err(HttpError::BadRequest(format!(
            "the body of the request could not be decoded as YAML: nested deeper than {MAX_YAML_FLOW_DEPTH}"
        )));
    }
    Ok(())
}

/// Refuses a body that is not a resource but names another kind than `kind`, as Kubernetes'
/// decoder refuses it (400).
fn check_kind(kind: &str, body: &Value) -> Result<(), HttpError> {
    let named = body.get("kind").and_then(Value::as_str).unwrap_or_default();
    if named.is_empty() || named == kind {
        return Ok(());
    }
    let version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("v1");
    Err(HttpError::BadRequest(format!(
        "no kind {named:?} is registered for version {version:?}: the body must be a {kind}"
    )))
}

/// Checks a `DeleteOptions` body as Kubernetes decodes one: another kind, or a value its
/// field's type does not take, is refused (400, with the decoder's message); unknown fields
/// are dropped.
pub fn check_delete_options(options: &mut Value) -> Result<(), HttpError> {
    check_kind("DeleteOptions", options)?;
    check_fields("meta.k8s.io", "DeleteOptions", options, Unknown::Drop)
        .map(drop)
        .map_err(HttpError::BadRequest)
}

/// How to treat fields the schema does not know (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// The `fieldValidation` a request names (none, or empty, is `Warn`); `None` for a value
    /// Kubernetes does not take (see `Query::field_validation`).
    pub fn parse(value: Option<&str>) -> Option<Self> {
        match value {
            None | Some("") | Some("Warn") => Some(FieldValidation::Warn),
            Some("Ignore") => Some(FieldValidation::Ignore),
            Some("Strict") => Some(FieldValidation::Strict),
            Some(_) => None,
        }
    }

    /// Checks `object` against its schema: a value of the wrong type is refused (400, as
    /// Kubernetes' decoder refuses it, whatever the validation); unknown fields are an error
    /// under Strict; under Warn and Ignore they are dropped, as Kubernetes drops them when it
    /// decodes a built-in type (Warn answers with a warning for each).
    /// `duplicates` are the paths of fields the body repeated: an error under Strict, a
    /// warning under Warn, as Kubernetes has them.
    pub fn check(
        self,
        resource: &ResourceType,
        object: &mut Value,
        duplicates: &[String],
    ) -> Result<Vec<String>, HttpError> {
        self.check_with(resource, object, duplicates, Empty::Omit)
    }

    /// As [`Self::check`] for the body of a subresource, of the kind `(group, version, kind)`
    /// (a `Scale`, a `Binding`, an `Eviction`, a namespace's `finalize` Namespace), which must
    /// not name another kind either.
    pub fn check_body(
        self,
        (group, version, kind): (&str, &str, &str),
        body: &mut Value,
        duplicates: &[String],
    ) -> Result<Vec<String>, HttpError> {
        check_kind(kind, body)?;
        self.check_as((group, version, kind), body, duplicates, Empty::Omit)
    }

    fn check_with(
        self,
        resource: &ResourceType,
        object: &mut Value,
        duplicates: &[String],
        empty: Empty,
    ) -> Result<Vec<String>, HttpError> {
        let kind = (resource.group, resource.version, resource.kind);
        self.check_as(kind, object, duplicates, empty)
    }

    /// The check of an `object` of the kind `(group, version, kind)`.
    fn check_as(
        self,
        (group, version, kind): (&str, &str, &str),
        object: &mut Value,
        duplicates: &[String],
        empty: Empty,
    ) -> Result<Vec<String>, HttpError> {
        let handling =
            if self == FieldValidation::Strict { Unknown::Report } else { Unknown::Drop };
        let unknown = check_fields_as(group, kind, object, handling, empty)
            .map_err(|decoding| undecodable(kind, version, &decoding))?;
        if self == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let duplicated = duplicates.iter().map(|f| format!("duplicate field \"{f}\""));
        let messages: Vec<String> =
            duplicated.chain(unknown.iter().map(|f| unknown_field_message(f))).collect();
        if self == FieldValidation::Strict && !messages.is_empty() {
            let decoding = format!("strict decoding error: {}", messages.join(", "));
            return Err(undecodable(kind, version, &decoding));
        }
        Ok(messages)
    }
}

/// Checks a server-side apply's configuration of `namespace`/`name` as Kubernetes' field
/// manager takes it, whatever `fieldValidation` says: a value of the wrong type as
/// [`Self::check`] refuses it, a field its kind does not declare and `managedFields` are
/// 400. Its empty fields stay (the applier owns them).
pub fn check_apply_config(
    resource: &ResourceType,
    namespace: &str,
    name: &str,
    config: &mut Value,
) -> Result<(), HttpError> {
    let kind = (resource.group, resource.version, resource.kind);
    check_apply_config_as(kind, namespace, name, config)
}

/// [`check_apply_config`] of a configuration of `(group, version, kind)`: a resource's or a
/// subresource's (a `Scale`).
pub fn check_apply_config_as(
    (group, version, kind): (&str, &str, &str),
    namespace: &str,
    name: &str,
    config: &mut Value,
) -> Result<(), HttpError> {
    let managed = config.get("metadata").and_then(|m| m.get("managedFields"));
    if managed.is_some_and(|m| !m.is_null()) {
        return Err(HttpError::BadRequest("metadata.managedFields must be nil".into()));
    }
    let unknown =
        check_fields_as(group, kind, config, Unknown::Report, Empty::Keep).map_err(|decoding| {
            HttpError::BadRequest(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: {decoding}"
            ))
        })?;
    if unknown.is_empty() {
        return Ok(());
    }
    // As structured-merge-diff words its schema errors, one or several.
    let errors: Vec<String> = unknown
        .iter()
        .map(|f| format!(".{}: field not declared in schema", f.trim_start_matches('.')))
        .collect();
    let kind = (group, version, kind);
    Err(HttpError::BadRequest(kplane_actors::core::typed_patch_error(
        namespace, name, kind, &errors,
    )))
}

/// The 400 of a body whose value its kind's type does not take, in Go's decoder's words.
fn undecodable(kind: &str, version: &str, decoding: &str) -> HttpError {
    HttpError::BadRequest(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: {decoding}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[actix_web::test]
    async fn a_body_that_trickles_in_is_given_up_on() {
        let trickle = futures::stream::pending();
        let timeout = std::time::Duration::from_millis(10);
        let given_up = read_within(trickle, 100, timeout).await;
        assert!(matches!(given_up, Err(HttpError::Timeout)), "{given_up:?}");
        let chunks = futures::stream::iter([Ok(web::Bytes::from_static(b"{}"))]);
        let whole = read_within(chunks, 100, std::time::Duration::from_secs(60)).await.unwrap();
        assert_eq!(&whole[..], b"{}");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_read_as_the_replacement_character() {
        let (value, _) = parse_json_with(b"{\"a\": \"x\xffy\"}", true).unwrap();
        assert_eq!(value["a"], "x\u{fffd}y");
    }

    #[test]
    fn deeply_nested_yaml_is_refused_before_it_is_parsed() {
        let deep = format!("a: {}{}", "[".repeat(50_000), "]".repeat(50_000));
        // Refused by the count, not by the parser (whose error is "recursion limit exceeded").
        let refused = parse_yaml(deep.as_bytes());
        assert!(matches!(refused, Err(HttpError::BadRequest(ref m)) if m.contains("nested")));
        let fine = "a: [[1, 2], {b: '[[['}]\nc: \"]]]\"\n";
        assert_eq!(
            parse_yaml(fine.as_bytes()).unwrap(),
            json!({"a": [[1, 2], {"b": "[[["}], "c": "]]]"})
        );
        // Closing brackets in quotes, comments and block scalars do not hide the nesting.
        let deep = |open: &str, close: &str| {
            let body = format!("a: {}{}", open.repeat(5_000), close.repeat(5_000));
            flow_depth(body.as_bytes())
        };
        assert!(deep("[\"]\", ", "]") > MAX_YAML_FLOW_DEPTH);
        assert!(deep("['}', ", "]") > MAX_YAML_FLOW_DEPTH);
        assert!(deep("[!!str \"]\", ", "]") > MAX_YAML_FLOW_DEPTH);
        assert!(deep("[ # ]\n", "]") > MAX_YAML_FLOW_DEPTH);
        assert!(deep("{\"a\":\"}\", \"b\":", "}") > MAX_YAML_FLOW_DEPTH);
        let (open, close) = ("[".repeat(5_000), "]".repeat(5_000));
        let plain = format!("a: b:'\nc: {open}{close}\nd: '");
        assert!(flow_depth(plain.as_bytes()) > MAX_YAML_FLOW_DEPTH, "`b:'` is a plain scalar");
        let block = format!("a: |\n  \"\nb: {open}{close}\nc: '\"'");
        assert!(flow_depth(block.as_bytes()) > MAX_YAML_FLOW_DEPTH, "the block scalar ends");
        // Brackets in plain, quoted and block scalars are not indicators.
        let text = format!("a: x[[[\nb: \"{open}\"\nc: |\n  {open}\n\n  {close}{open}\nd: 1\n");
        assert!(flow_depth(text.as_bytes()) < 10, "{}", flow_depth(text.as_bytes()));
        assert_eq!(parse_yaml(text.as_bytes()).unwrap()["d"], 1);
    }

    #[test]
    fn yaml_floats_without_a_json_form_are_refused() {
        for (body, printed) in
            [("a: .nan", "NaN"), ("a: [.inf]", "+Inf"), ("a: {b: -.Inf}", "-Inf")]
        {
            let expected = format!("json: unsupported value: {printed}");
            for parsed in [
                parse_yaml(body.as_bytes()),
                parse_yaml_noting_duplicates(body.as_bytes()).map(|p| p.0),
            ] {
                let Err(HttpError::BadRequest(message)) = parsed else {
                    panic!("{body} was taken: {parsed:?}");
                };
                assert!(message.contains(&expected), "{message}");
            }
        }
        assert_eq!(parse_yaml(b"a: 1.5").unwrap(), json!({"a": 1.5}));
    }

    #[test]
    fn yaml_bodies_note_their_repeated_keys_and_keep_the_last() {
        let text = "kind: ConfigMap\ndata:\n  a: b\n  a: c\nspec:\n  containers:\n  - name: x\n    name: y\n";
        let (value, duplicates) = parse_yaml_noting_duplicates(text.as_bytes()).unwrap();
        assert_eq!(value["data"]["a"], "c");
        assert_eq!(value["spec"]["containers"][0]["name"], "y");
        assert_eq!(duplicates, ["data.a", "spec.containers[0].name"]);
        // JSON sent as YAML is JSON, repeats and all.
        let (value, duplicates) = parse_yaml_noting_duplicates(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!((value["a"].clone(), duplicates), (json!(2), vec!["a".to_string()]));
        assert!(parse_yaml_noting_duplicates(b"  ").is_err());
        assert!(parse_yaml_noting_duplicates(b"a: [").is_err());
    }

    #[test]
    fn bodies_that_are_not_resources_are_decoded_as_kubernetes_decodes_them() {
        let refused = |mut body: Value| match check_delete_options(&mut body) {
            Err(HttpError::BadRequest(message)) => message,
            other => panic!("{body} was not refused: {other:?}"),
        };
        let message = refused(json!({"gracePeriodSeconds": "x"}));
        assert!(
            message.ends_with(
                "json: cannot unmarshal string into Go struct field \
                 DeleteOptions.gracePeriodSeconds of type int64"
            ),
            "{message}"
        );
        refused(json!({"preconditions": {"uid": 7}}));
        refused(json!({"dryRun": "All"}));
        refused(json!({"orphanDependents": "yes"}));
        assert!(refused(json!({"kind": "Pod"})).contains("\"Pod\""));
        let mut fine = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
            "propagationPolicy": "Foreground", "preconditions": {"uid": "u"}, "bogus": 1});
        check_delete_options(&mut fine).unwrap();
        assert_eq!(fine.get("bogus"), None, "unknown fields are dropped");
        assert_eq!(fine["gracePeriodSeconds"], 0);
        const SCALE: (&str, &str, &str) = ("autoscaling", "v1", "Scale");
        let mut scale = json!({"kind": "Scale", "spec": {"replicas": "3"}});
        let refused = FieldValidation::Ignore.check_body(SCALE, &mut scale, &[]).unwrap_err();
        assert!(
            matches!(&refused, HttpError::BadRequest(m) if m == "Scale in version \"v1\" cannot \
                be handled as a Scale: json: cannot unmarshal string into Go struct field \
                ScaleSpec.spec.replicas of type int32"),
            "{refused:?}"
        );
        // Unknown and repeated fields as `fieldValidation` has them, as for a resource.
        let scale = json!({"kind": "Scale", "spec": {"replicas": 3, "bogus": 1}});
        let repeated = ["spec.replicas".to_string()];
        let mut warned = scale.clone();
        let warnings = FieldValidation::Warn.check_body(SCALE, &mut warned, &repeated).unwrap();
        assert_eq!(warnings, ["duplicate field \"spec.replicas\"", "unknown field \"spec.bogus\""]);
        assert_eq!(warned, json!({"kind": "Scale", "spec": {"replicas": 3}}));
        let refused =
            FieldValidation::Strict.check_body(SCALE, &mut scale.clone(), &[]).unwrap_err();
        assert!(
            matches!(&refused, HttpError::BadRequest(m)
                if m == "Scale in version \"v1\" cannot be handled as a Scale: strict decoding \
                    error: unknown field \"spec.bogus\""),
            "{refused:?}"
        );
        let refused = FieldValidation::Ignore.check_body(SCALE, &mut json!({"kind": "Pod"}), &[]);
        assert!(matches!(refused, Err(HttpError::BadRequest(_))), "{refused:?}");
    }

    #[test]
    fn repeated_fields_are_noted_with_their_paths_and_the_last_is_kept() {
        let body = br#"{"metadata":{"name":"a","name":"b"},
            "spec":{"containers":[{"name":"c","image":"x","image":"y"}]},"kind":"Pod","kind":"Pod",
            "data":{"a":"1","n":{"x":1}},"data":{"b":"2","n":{"y":2},"a":"3"}}"#;
        let (value, duplicates) = parse_json_noting_duplicates(body).unwrap();
        assert_eq!(duplicates, ["metadata.name", "spec.containers[0].image", "kind", "data"]);
        assert_eq!(value["metadata"]["name"], "b");
        assert_eq!(value["spec"]["containers"][0]["image"], "y");
        // A repeated object is decoded into the first, as Go decodes it into the same map.
        assert_eq!(value["data"], json!({"a": "3", "b": "2", "n": {"x": 1, "y": 2}}));
        let plain = br#"{"a":[1,-2,3.5,"s",true,null,{}],"b":{"c":18446744073709551615}}"#;
        let (value, duplicates) = parse_json_noting_duplicates(plain).unwrap();
        assert!(duplicates.is_empty());
        assert_eq!(value, serde_json::from_slice::<Value>(plain).unwrap());
        assert_eq!(value["b"]["c"], json!(u64::MAX));
        for broken in [&b""[..], b"  ", b"{", b"{} {}", b"[1,]"] {
            assert!(matches!(parse_json(broken), Err(HttpError::BadRequest(_))), "{broken:?}");
        }
    }

    #[test]
    fn a_patch_is_decoded_as_a_map_whose_last_repeat_wins_with_its_findings() {
        let merge = br#"{"data":{"n":{"x":1}},"data":{"n":{"y":2}}}"#;
        let (patch, findings) = parse_patch(PatchType::Merge, merge).unwrap();
        assert_eq!(patch, json!({"data": {"n": {"y": 2}}}));
        assert_eq!(findings, [r#"duplicate field "data""#]);
        let operations = br#"[{"op":"add","path":"/a","value":{"k":1,"k":2},"zz":1,"op":"add"},
            {"op":"remove","path":"/b"},{"path":"/c","op":"test","value":1,"extra":true}]"#;
        let (patch, findings) = parse_patch(PatchType::Json, operations).unwrap();
        assert_eq!(patch[0]["value"], json!({"k": 2}));
        assert_eq!(
            findings,
            [
                r#"json patch duplicate field "[0].value.k""#,
                r#"json patch duplicate field "[0].op""#,
                r#"json patch unknown field "[0].zz""#,
                r#"json patch unknown field "[2].extra""#,
            ]
        );
        let (_, findings) = parse_patch(PatchType::StrategicMerge, br#"{"a":1}"#).unwrap();
        assert!(findings.is_empty());
    }
}

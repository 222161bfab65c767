//! Request bodies: size limit, content types (JSON, protobuf) and strict field validation.

use actix_web::{web, HttpRequest};
use futures::StreamExt;
use kplane_actors::model::ResourceType;
use serde_json::Value;

use crate::error::HttpError;

/// Reads the whole body, refusing more than `limit` bytes with 413.
pub async fn read(mut payload: web::Payload, limit: usize) -> Result<web::Bytes, HttpError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            return Err(HttpError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// The media type of the request body without parameters; a missing one means JSON.
pub fn content_type(req: &HttpRequest) -> String {
    req.headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "application/json".into())
}

/// Decodes an object body (create, update, a delete's options) as JSON, YAML or Kubernetes
/// protobuf, as its Content-Type says (none means JSON).
pub fn decode_object(req: &HttpRequest, bytes: &[u8]) -> Result<Value, HttpError> {
    match content_type(req).as_str() {
        "application/json" => parse_json(bytes),
        "application/yaml" => parse_yaml(bytes),
        "application/vnd.kubernetes.protobuf" => super::protobuf::decode(bytes)
            .map_err(|e| HttpError::BadRequest(format!("decoding protobuf body: {e}"))),
        other => Err(HttpError::UnsupportedMediaType(other.to_string())),
    }
}

/// Parses JSON, naming where it broke.
pub fn parse_json(bytes: &[u8]) -> Result<Value, HttpError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(HttpError::BadRequest("the request body is empty".into()));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        HttpError::BadRequest(format!("the body of the request could not be decoded as JSON: {e}"))
    })
}

/// Parses a YAML document (an apply patch; JSON is YAML too) into its JSON value.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value, HttpError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(HttpError::BadRequest("the request body is empty".into()));
    }
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    serde_yaml::from_slice(bytes).map_err(|e| {
        HttpError::BadRequest(format!("the body of the request could not be decoded as YAML: {e}"))
    })
}

/// How to treat fields the schema does not know (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn from_query(value: Option<&str>) -> Result<Self, HttpError> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(HttpError::BadRequest(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, got {other:?}"
            ))),
        }
    }

    /// Checks `object` against its schema: a value of the wrong type is refused (400, as
    /// Kubernetes' decoder refuses it, whatever the validation); unknown fields are an error
    /// under Strict; under Warn and Ignore they are dropped, as Kubernetes drops them when it
    /// decodes a built-in type (Warn answers with a warning for each).
    pub fn check(
        self,
        resource: &ResourceType,
        object: &mut Value,
    ) -> Result<Vec<String>, HttpError> {
        use super::openapi::{check_fields, Unknown};
        let handling =
            if self == FieldValidation::Strict { Unknown::Report } else { Unknown::Drop };
        let unknown =
            check_fields(resource.group, resource.kind, object, handling).map_err(|decoding| {
                let (kind, version) = (resource.kind, resource.version);
                HttpError::BadRequest(format!(
                    "{kind} in version {version:?} cannot be handled as a {kind}: {decoding}"
                ))
            })?;
        if self == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let messages: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{}\"", f.trim_start_matches('.')))
            .collect();
        if self == FieldValidation::Strict && !messages.is_empty() {
            return Err(HttpError::BadRequest(format!(
                "strict decoding error: {}",
                messages.join(", ")
            )));
        }
        Ok(messages)
    }
}

//! The one place errors become Kubernetes `Status` objects and HTTP status codes.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use kplane_actors::core::ApiError;
use kplane_actors::model::FieldError;
use serde_json::{json, Value};

/// Every way an HTTP request can fail: the API core's errors plus the edge's own.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// A body in a media type the verb does not take; the types it takes, as Kubernetes lists
    /// them ([`OBJECT_MEDIA_TYPES`], [`PATCH_MEDIA_TYPES`]).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {0}"
    )]
    UnsupportedMediaType(&'static str),
    /// `Accept` admits none of the media types a response can be written in (listed).
    #[error("only the following media types are accepted: {0}")]
    NotAcceptable(&'static str),
    /// `Accept` asked for a conversion the response cannot take (one object's metadata for a
    /// list, say).
    #[error("{0}")]
    NotConvertible(String),
    #[error("Request entity too large: limit is {0}")]
    TooLarge(usize),
    /// The request did not come whole in time (its body trickled in).
    #[error("request did not complete within the allowed duration")]
    Timeout,
    #[error("the server could not find the requested resource")]
    NoSuchPath,
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("{0}")]
    BadRequest(String),
    /// Over the in-flight limit: retry after a second.
    #[error("Too many requests, please try again later.")]
    TooManyRequests,
    /// The secure port could not tell who the request is.
    #[error("Unauthorized")]
    Unauthorized,
    /// The secure port's authorizer denied the request (`kind` is its resource, empty for a
    /// path).
    #[error("{message}")]
    Forbidden { message: String, kind: String, group: String, name: String },
}

impl From<actix_web::error::PayloadError> for HttpError {
    fn from(error: actix_web::error::PayloadError) -> Self {
        HttpError::BadRequest(format!("reading the request body: {error}"))
    }
}

/// The media types of an object's body (create, update, delete options).
pub const OBJECT_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";
/// The media types of a patch.
pub const PATCH_MEDIA_TYPES: &str = "application/json-patch+json, application/merge-patch+json, \
     application/strategic-merge-patch+json, application/apply-patch+yaml";

/// How long a client told 429 waits before trying again.
const RETRY_AFTER_SECONDS: u64 = 1;

/// How an internal error's message begins, as Kubernetes words it.
const INTERNAL: &str = "Internal error occurred: ";

/// The Kubernetes `Status` for a failure, with its HTTP code.
pub fn status_of(error: &HttpError) -> (StatusCode, Value) {
    let message = match error {
        HttpError::Api(ApiError::PatchNotApplicable(_)) => {
            "the server rejected our request due to an error in our request".to_string()
        }
        // Kubernetes' `NewInternalError`: the message prefixed, the error itself its cause.
        HttpError::Api(ApiError::Internal(why)) if !why.starts_with(INTERNAL) => {
            format!("{INTERNAL}{why}")
        }
        _ => error.to_string(),
    };
    let (code, reason, details) = match error {
        HttpError::Api(api) => match api {
            ApiError::NotFound { resource, group, name } => {
                (404, "NotFound", Some(details(name, resource, group)))
            }
            ApiError::AlreadyExists { resource, group, name, .. } => {
                (409, "AlreadyExists", Some(details(name, resource, group)))
            }
            ApiError::Conflict { resource, group, name, .. } => {
                (409, "Conflict", Some(details(name, resource, group)))
            }
            ApiError::ApplyConflict { conflicts } => {
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| {
                        json!({"reason": "FieldManagerConflict", "field": c.path,
                            "message": format!("conflict with {}", c.manager_text())})
                    })
                    .collect();
                (409, "Conflict", Some(json!({"causes": causes})))
            }
            ApiError::Invalid { kind, group, name, causes } => {
                (422, "Invalid", Some(with_causes(details(name, kind, group), causes)))
            }
            ApiError::ForbiddenWrite { resource, group, name, causes, .. } => {
                (403, "Forbidden", Some(with_causes(details(name, resource, group), causes)))
            }
            ApiError::BadRequest(_) => (400, "BadRequest", None),
            // As kube-apiserver answers a JSON patch that does not apply: its generic 422,
            // which names no cause. The reason goes to the server's debug log.
            ApiError::PatchNotApplicable(why) => {
                tracing::debug!(reason = %why, "a JSON patch did not apply");
                (422, "Invalid", Some(json!({})))
            }
            ApiError::Forbidden(_) => (403, "Forbidden", None),
            ApiError::UnsupportedMediaType(_) => (415, "UnsupportedMediaType", None),
            ApiError::Expired(_) | ApiError::InconsistentContinue { .. } => (410, "Expired", None),
            ApiError::MethodNotAllowed(_) => (405, "MethodNotAllowed", Some(json!({}))),
            ApiError::RequestTooLarge(_) => (413, "RequestEntityTooLarge", None),
            ApiError::Internal(why) => {
                let cause = why.strip_prefix(INTERNAL).unwrap_or(why);
                (500, "InternalError", Some(json!({"causes": [{"message": cause}]})))
            }
            ApiError::Unavailable(_) => (503, "ServiceUnavailable", None),
            ApiError::Unsupported(_) => (500, "", None),
            ApiError::DisruptionBudget { cause, retry_after_seconds } => {
                let mut d = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
                if *retry_after_seconds > 0 {
                    d["retryAfterSeconds"] = json!(retry_after_seconds);
                }
                (429, "TooManyRequests", Some(d))
            }
            ApiError::TooLargeResourceVersion { .. } => (
                504,
                "Timeout",
                Some(json!({"causes": [{"reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version"}], "retryAfterSeconds": 1})),
            ),
        },
        HttpError::UnsupportedMediaType(_) => (415, "UnsupportedMediaType", None),
        HttpError::NotAcceptable(_) | HttpError::NotConvertible(_) => (406, "NotAcceptable", None),
        HttpError::TooLarge(_) => (413, "RequestEntityTooLarge", None),
        HttpError::Timeout => (504, "Timeout", None),
        // As kube-apiserver's: empty details, which clients read (kubectl debug does).
        HttpError::NoSuchPath => (404, "NotFound", Some(json!({}))),
        // Kubernetes' 405s carry details, empty when they name no resource.
        HttpError::MethodNotAllowed => (405, "MethodNotAllowed", Some(json!({}))),
        HttpError::BadRequest(_) => (400, "BadRequest", None),
        // As kube-apiserver's max-in-flight filter answers: the details say only when to retry.
        HttpError::TooManyRequests => {
            (429, "TooManyRequests", Some(json!({"retryAfterSeconds": RETRY_AFTER_SECONDS})))
        }
        HttpError::Unauthorized => (401, "Unauthorized", None),
        HttpError::Forbidden { kind, group, name, .. } => {
            (403, "Forbidden", Some(details(name, kind, group)))
        }
    };
    let mut status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    if let Some(d) = details {
        status["details"] = d;
    }
    if reason.is_empty() {
        // (Go leaves out an empty reason.)
        status.as_object_mut().expect("an object").remove("reason");
    }
    if let HttpError::Api(ApiError::InconsistentContinue { continue_token }) = error {
        status["metadata"] = json!({"continue": continue_token});
    }
    (StatusCode::from_u16(code).expect("valid status code"), status)
}

/// A Status's details: what of the object's name, group and kind is known (Go's
/// `StatusDetails` leaves out each that is empty).
fn details(name: &str, kind: &str, group: &str) -> Value {
    let mut d = json!({});
    for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
        if !value.is_empty() {
            d[key] = json!(value);
        }
    }
    d
}

/// `details` with the field causes, when there are any.
fn with_causes(mut details: Value, causes: &[FieldError]) -> Value {
    if !causes.is_empty() {
        details["causes"] = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
    }
    details
}

/// The `Status` an error response carries, kept in its extensions for the audit log.
#[derive(Debug)]
pub struct ErrorStatus(pub Value);

impl ResponseError for HttpError {
    fn status_code(&self) -> StatusCode {
        status_of(self).0
    }

    fn error_response(&self) -> HttpResponse {
        let (code, body) = status_of(self);
        let mut response = HttpResponse::build(code);
        // As kube-apiserver's response writer: a Status that says when to retry says it in the
        // header too.
        let retry_after = body.pointer("/details/retryAfterSeconds").and_then(Value::as_u64);
        if let Some(seconds) = retry_after.filter(|s| *s > 0) {
            response.insert_header(("Retry-After", seconds.to_string()));
        }
        let mut response = response.content_type("application/json").body(body.to_string());
        // For the audit log, which records what a request was refused with.
        response.extensions_mut().insert(ErrorStatus(body));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_are_worded_and_detailed_as_kubernetes_words_them() {
        let error = |why: &str| HttpError::Api(ApiError::Internal(why.into()));
        let (code, body) = status_of(&error("store: the disk is full"));
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["message"], "Internal error occurred: store: the disk is full");
        assert_eq!(body["details"], json!({"causes": [{"message": "store: the disk is full"}]}));
        let (_, body) = status_of(&error("Internal error occurred: range is full"));
        assert_eq!(body["message"], "Internal error occurred: range is full");
        assert_eq!(body["details"]["causes"][0]["message"], "range is full");
    }

    #[test]
    fn not_found_status_matches_kubernetes() {
        let error =
            HttpError::Api(ApiError::NotFound { resource: "pods", group: "", name: "x".into() });
        let (code, body) = status_of(&error);
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert_eq!(body["message"], "pods \"x\" not found");
        assert_eq!(body["details"], json!({"name": "x", "kind": "pods"}));
        assert_eq!(status_of(&HttpError::TooLarge(3)).0, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(status_of(&HttpError::NoSuchPath).1["details"], json!({}));
        assert_eq!(status_of(&HttpError::MethodNotAllowed).1["details"], json!({}));
    }

    #[test]
    fn a_json_patch_that_does_not_apply_is_kube_apiservers_generic_422() {
        let error = HttpError::Api(ApiError::PatchNotApplicable("test failed".into()));
        let (code, body) = status_of(&error);
        assert_eq!(code.as_u16(), 422);
        assert_eq!(body["reason"], "Invalid");
        assert_eq!(
            body["message"],
            "the server rejected our request due to an error in our request"
        );
        assert_eq!(body["details"], json!({}));
    }

    #[test]
    fn too_many_requests_asks_to_retry_after_a_second() {
        let response = HttpError::TooManyRequests.error_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers().get("Retry-After").unwrap(), "1");
        let (_, body) = status_of(&HttpError::TooManyRequests);
        assert_eq!(body["reason"], "TooManyRequests");
        assert_eq!(body["details"], json!({"retryAfterSeconds": 1}));
    }
}

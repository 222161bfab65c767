//! The API core's error type: what a request can fail with, before any HTTP concern.

use super::managed_fields::{conflict_message, FieldConflict};
use crate::model::{FieldError, ResourceType};
use crate::store::StoreError;
use crate::watch::WatchError;

/// Errors of the API layer. The HTTP edge maps each variant to a Kubernetes `Status` once.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{resource} {name:?} not found")]
    NotFound { resource: &'static str, group: &'static str, name: String },
    #[error("{resource} {name:?} already exists")]
    AlreadyExists { resource: &'static str, group: &'static str, name: String },
    #[error("{message}")]
    Conflict { resource: &'static str, group: &'static str, name: String, message: String },
    /// A server-side apply would change fields other managers own.
    #[error("{}", conflict_message(.conflicts))]
    ApplyConflict {
        resource: &'static str,
        group: &'static str,
        name: String,
        conflicts: Vec<FieldConflict>,
    },
    #[error("{kind} {name:?} is invalid: {}", summarize(.causes))]
    Invalid { kind: &'static str, group: &'static str, name: String, causes: Vec<FieldError> },
    #[error("{0}")]
    BadRequest(String),
    /// A well-formed JSON patch that cannot be applied to the object (a failed `test`, a
    /// path that is not there): 422, as Kubernetes answers it.
    #[error("{0}")]
    PatchNotApplicable(String),
    #[error("{0}")]
    Forbidden(String),
    /// A request body in a format this resource does not take.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A resourceVersion or continue token that is no longer available.
    #[error("{0}")]
    Expired(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    Unavailable(String),
    /// A resourceVersion newer than the store has reached (clients retry).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion { requested: u64, current: u64 },
}

fn summarize(causes: &[FieldError]) -> String {
    causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>().join(", ")
}

impl ApiError {
    pub fn not_found(resource: &'static ResourceType, name: &str) -> Self {
        ApiError::NotFound { resource: resource.plural, group: resource.group, name: name.into() }
    }

    pub fn invalid(resource: &'static ResourceType, name: &str, causes: Vec<FieldError>) -> Self {
        ApiError::Invalid { kind: resource.kind, group: resource.group, name: name.into(), causes }
    }

    /// Query options of a list or watch that do not go together: 422 on `ListOptions`, as
    /// Kubernetes answers them.
    pub fn invalid_list_options(cause: FieldError) -> Self {
        ApiError::Invalid {
            kind: "ListOptions",
            group: "meta.k8s.io",
            name: String::new(),
            causes: vec![cause],
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(key) => ApiError::not_found(key.resource, &key.name),
            StoreError::AlreadyExists(key) => ApiError::AlreadyExists {
                resource: key.resource.plural,
                group: key.resource.group,
                name: key.name,
            },
            StoreError::Conflict { key, message } => ApiError::Conflict {
                resource: key.resource.plural,
                group: key.resource.group,
                name: key.name,
                message,
            },
            StoreError::Expired(rv) => ApiError::Expired(format!(
                "The provided continue parameter is too old to display a consistent list \
                 result (resource version {rv}). You can start a new list without the continue \
                 parameter."
            )),
            StoreError::Unavailable => ApiError::Unavailable(error.to_string()),
            StoreError::Engine(_) | StoreError::Corrupt(_) | StoreError::Layout(_) => {
                ApiError::Internal(error.to_string())
            }
        }
    }
}

impl From<WatchError> for ApiError {
    fn from(error: WatchError) -> Self {
        match error {
            WatchError::Expired { .. } | WatchError::TooSlow(_) => {
                ApiError::Expired(error.to_string())
            }
            WatchError::Unavailable => ApiError::Unavailable(error.to_string()),
        }
    }
}

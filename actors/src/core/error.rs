//! The API core's error type: what a request can fail with, before any HTTP concern.

use super::managed_fields::{conflict_message, FieldConflict};
pub(crate) use crate::model::resources::qualified;
use crate::model::{FieldError, ResourceType};
use crate::store::StoreError;
use crate::watch::WatchError;

/// Errors of the API layer. The HTTP edge maps each variant to a Kubernetes `Status` once.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{} {name:?} not found", qualified(resource, group))]
    NotFound { resource: &'static str, group: &'static str, name: String },
    /// The name is taken; `being_deleted` when by an object on its way out (said first in the
    /// message, as Kubernetes says it).
    #[error(
        "{}{} {name:?} already exists",
        if *being_deleted { "object is being deleted: " } else { "" },
        qualified(resource, group)
    )]
    AlreadyExists { resource: &'static str, group: &'static str, name: String, being_deleted: bool },
    #[error("{message}")]
    Conflict { resource: &'static str, group: &'static str, name: String, message: String },
    /// A server-side apply would change fields other managers own. Its Status names only
    /// the conflicts, not the object (Kubernetes' `NewApplyConflict`).
    #[error("{}", conflict_message(.conflicts))]
    ApplyConflict { conflicts: Vec<FieldConflict> },
    #[error("{} {name:?} is invalid: {}", qualified(kind, group), summarize(.causes))]
    Invalid { kind: &'static str, group: &'static str, name: String, causes: Vec<FieldError> },
    #[error("{0}")]
    BadRequest(String),
    /// A well-formed JSON patch that cannot be applied to the object (a failed `test`, a
    /// path that is not there): 422, as Kubernetes answers it.
    #[error("{0}")]
    PatchNotApplicable(String),
    #[error("{0}")]
    Forbidden(String),
    /// An admission check refuses a write to one object (Kubernetes' `NewForbidden`).
    #[error("{} {name:?} is forbidden: {message}", qualified(resource, group))]
    ForbiddenWrite {
        resource: &'static str,
        group: &'static str,
        name: String,
        message: String,
        causes: Vec<FieldError>,
    },
    /// A request body in a format this resource does not take.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A resourceVersion or continue token that is no longer available.
    #[error("{0}")]
    Expired(String),
    /// A continue token whose snapshot is gone, with the token that goes on from the same
    /// place in the latest state (Kubernetes' "inconsistent continue").
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You \
         can start a new list without the continue parameter, or use the continue token in \
         this response to retrieve the remainder of the results. Continuing with the provided \
         token results in an inconsistent list - objects that were created, modified, or \
         deleted between the time the first chunk was returned and now may show up in the list."
    )]
    InconsistentContinue { continue_token: String },
    #[error("{0}")]
    MethodNotAllowed(String),
    /// A request asking more than the server takes at once (413).
    #[error("{0}")]
    RequestTooLarge(String),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    Unavailable(String),
    /// A request the API does not support as asked, which Kubernetes answers with a bare
    /// Failure Status: code 500, no reason (an eviction of a pod several budgets cover).
    #[error("{0}")]
    Unsupported(String),
    /// An eviction that its pod's disruption budget does not allow now (429; clients retry).
    #[error("Cannot evict pod as it would violate the pod's disruption budget.")]
    DisruptionBudget { cause: String, retry_after_seconds: u64 },
    /// A resourceVersion newer than the store has reached (clients retry).
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion { requested: u64, current: u64 },
}

/// The causes in one line, as Kubernetes' error aggregate writes them: each once, and in
/// brackets when there are several.
fn summarize(causes: &[FieldError]) -> String {
    aggregate(causes.iter().map(|cause| format!("{}: {}", cause.field, cause.message)))
}

/// Messages in one line, as Go's error aggregate writes them: each once, and in brackets when
/// there are several.
pub fn aggregate(messages: impl IntoIterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for message in messages {
        if !seen.contains(&message) {
            seen.push(message);
        }
    }
    match seen.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl ApiError {
    pub fn not_found(resource: &'static ResourceType, name: &str) -> Self {
        ApiError::NotFound { resource: resource.plural, group: resource.group, name: name.into() }
    }

    pub fn invalid(resource: &'static ResourceType, name: &str, causes: Vec<FieldError>) -> Self {
        ApiError::Invalid { kind: resource.kind, group: resource.group, name: name.into(), causes }
    }

    /// A write to the object `name` of `resource` that admission refuses, for `message`.
    pub fn forbidden(
        resource: &'static ResourceType,
        name: &str,
        message: String,
        causes: Vec<FieldError>,
    ) -> Self {
        let (resource, group) = (resource.plural, resource.group);
        ApiError::ForbiddenWrite { resource, group, name: name.into(), message, causes }
    }

    /// Options of a request that Kubernetes' validation refuses: 422 on their kind
    /// (`ListOptions`, `DeleteOptions`, `CreateOptions`, ...), as Kubernetes answers them.
    pub fn invalid_options(kind: &'static str, causes: Vec<FieldError>) -> Self {
        ApiError::Invalid { kind, group: "meta.k8s.io", name: String::new(), causes }
    }

    /// Whether one of the error's causes has `reason` (e.g. `NamespaceTerminating`), as
    /// client-go's `HasStatusCause` asks (of an error from the API core: the REST client's
    /// errors keep only the causes' fields and messages).
    pub fn has_cause(&self, reason: &str) -> bool {
        match self {
            ApiError::Invalid { causes, .. } | ApiError::ForbiddenWrite { causes, .. } => {
                causes.iter().any(|cause| cause.reason == reason)
            }
            _ => false,
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
                being_deleted: false,
            },
            StoreError::Conflict { key, message } => ApiError::Conflict {
                resource: key.resource.plural,
                group: key.resource.group,
                name: key.name,
                message,
            },
            StoreError::Expired(_) => ApiError::Expired(
                "The provided continue parameter is too old to display a consistent list \
                 result. You can start a new list without the continue parameter."
                    .into(),
            ),
            StoreError::Unavailable => ApiError::Unavailable(error.to_string()),
            StoreError::Engine(_)
            | StoreError::Corrupt(_)
            | StoreError::Layout(_)
            | StoreError::Failed(_) => ApiError::Internal(error.to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resources::find;

    #[test]
    fn invalid_names_the_qualified_kind_and_brackets_several_causes() {
        let services = find("", "v1", "services").unwrap();
        let one = vec![FieldError::required("spec.ports")];
        assert_eq!(
            ApiError::invalid(services, "web", one).to_string(),
            "Service \"web\" is invalid: spec.ports: Required value"
        );
        let port = FieldError::invalid("spec.ports[0].port", "0", "must be between 1 and 65535");
        let twice = vec![port.clone(), FieldError::required("spec.selector"), port];
        assert_eq!(
            ApiError::invalid(services, "web", twice).to_string(),
            "Service \"web\" is invalid: [spec.ports[0].port: Invalid value: \"0\": must be \
             between 1 and 65535, spec.selector: Required value]"
        );
        let leases = find("coordination.k8s.io", "v1", "leases").unwrap();
        let lease = ApiError::invalid(leases, "l", vec![FieldError::required("spec")]);
        assert_eq!(
            lease.to_string(),
            "Lease.coordination.k8s.io \"l\" is invalid: spec: Required value"
        );
    }
}

//! `RestClient`: the `ApiClient` over HTTP. Requests follow the Kubernetes REST paths, watches
//! read the chunked stream of newline-delimited JSON events, and failures come back as the same
//! `ApiError` variants the in-process client returns (mapped once, in [`error_from_status`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use kplane_actors::client::{object_name, ApiClient, ClientEvent, ClientList, ClientWatch};
use kplane_actors::core::{ApiError, DeleteOptions, ListOptions, PatchType, WatchOptions};
use kplane_actors::model::resources::{self, RESOURCES};
use kplane_actors::model::{FieldError, ResourceType};
use kplane_actors::watch::EventType;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

/// How long establishing a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a whole non-watch request may take, body included. Watches have no limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A watch event larger than this is refused rather than buffered without bound (objects are
/// limited to a few MiB by the server).
const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;
/// How much of an unexpected response body an error message quotes.
const EXCERPT_BYTES: usize = 200;

/// Bytes left as they are in a path segment: RFC 3986 unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Why a [`RestClient`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RestClientError {
    /// The server URL is not `http://host[:port]`.
    #[error("server URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// An `https://` URL: TLS is not implemented in the client yet.
    #[error("server URL {0:?}: https is not supported yet; use http://host:port")]
    HttpsUnsupported(String),
    /// The HTTP client could not be set up.
    #[error("building the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// An `ApiClient` that talks to a kplane (or Kubernetes) API server over plain HTTP.
/// Cloning is cheap: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct RestClient {
    http: reqwest::Client,
    /// `http://host[:port]`, without a trailing slash.
    base: Arc<str>,
}

// === impl RestClient ===

impl RestClient {
    /// A client for the server at `server`, which must be `http://host[:port]` (a trailing `/`
    /// is accepted; paths, queries and credentials are not).
    pub fn new(server: &str) -> Result<Self, RestClientError> {
        let invalid = |reason: &str| RestClientError::InvalidUrl {
            url: server.to_string(),
            reason: reason.to_string(),
        };
        if !server.contains("://") {
            return Err(invalid("no scheme; expected http://host:port"));
        }
        let url = reqwest::Url::parse(server).map_err(|e| invalid(&e.to_string()))?;
        match url.scheme() {
            "http" => {}
            "https" => return Err(RestClientError::HttpsUnsupported(server.to_string())),
            other => return Err(invalid(&format!("unsupported scheme {other:?}; expected http"))),
        }
        if url.host().is_none() {
            return Err(invalid("no host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("credentials in the URL are not supported"));
        }
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return Err(invalid("expected no path, query or fragment after host:port"));
        }
        let http = reqwest::Client::builder()
            // The API server names this client's field manager after its product, as for
            // kubectl: `kubelet`, the component an agent stands for (what the embedded
            // agent's writes are recorded as too).
            .user_agent(concat!("kubelet/", env!("CARGO_PKG_VERSION"), " (kplane agent)"))
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_keepalive(Duration::from_secs(30))
            // A redirect from an API server is a misconfiguration: report it, don't follow it.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { http, base: url.origin().ascii_serialization().into() })
    }

    fn request(&self, method: Method, path: &str, query: &[(&str, String)]) -> RequestBuilder {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header(ACCEPT, HeaderValue::from_static("application/json"));
        if !query.is_empty() {
            // Percent-encoded; an encoding failure surfaces when the request is sent.
            request = request.query(query);
        }
        request
    }

    /// Sends a non-watch request and returns the body of a 2xx answer.
    async fn send(
        &self,
        resource: &'static ResourceType,
        request: RequestBuilder,
    ) -> Result<Bytes, ApiError> {
        let response = request.timeout(REQUEST_TIMEOUT).send().await.map_err(transport_error)?;
        let code = response.status().as_u16();
        let body = response.bytes().await.map_err(transport_error)?;
        if (200..300).contains(&code) {
            Ok(body)
        } else {
            Err(error_from_response(resource, code, &body))
        }
    }

    async fn send_for_object(
        &self,
        resource: &'static ResourceType,
        request: RequestBuilder,
    ) -> Result<Value, ApiError> {
        let body = self.send(resource, request).await?;
        parse_json(&body)
    }
}

#[async_trait]
impl ApiClient for RestClient {
    async fn get(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let path = object_path(resource, namespace, name, None)?;
        self.send_for_object(resource, self.request(Method::GET, &path, &[])).await
    }

    async fn list(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ClientList, ApiError> {
        let mut query = selectors(&options.label_selector, &options.field_selector);
        if let Some(limit) = options.limit {
            query.push(("limit", limit.to_string()));
        }
        if let Some(token) = options.continue_token.as_ref().filter(|t| !t.is_empty()) {
            query.push(("continue", token.clone()));
        }
        let path = collection_path(resource, namespace)?;
        let list = self.send_for_object(resource, self.request(Method::GET, &path, &query)).await?;
        let Value::Object(mut list) = list else {
            return Err(ApiError::Internal("the server answered a list with a non-object".into()));
        };
        let metadata = list.get("metadata");
        let text = |key: &str| {
            metadata.and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("").to_string()
        };
        let resource_version = text("resourceVersion");
        let continue_token = Some(text("continue")).filter(|t| !t.is_empty());
        let items = match list.remove("items") {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(ApiError::Internal("the list's items are not an array".into())),
        };
        Ok(ClientList { resource_version, items, continue_token })
    }

    async fn create(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        let path = collection_path(resource, Some(required_namespace(resource, namespace)?))?;
        let request = self.request(Method::POST, &path, &[]).json(&object);
        self.send_for_object(resource, request).await
    }

    async fn update(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        let path = object_path(resource, namespace, object_name(&object), None)?;
        let request = self.request(Method::PUT, &path, &[]).json(&object);
        self.send_for_object(resource, request).await
    }

    async fn update_status(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        let path = object_path(resource, namespace, object_name(&object), Some("status"))?;
        let request = self.request(Method::PUT, &path, &[]).json(&object);
        self.send_for_object(resource, request).await
    }

    async fn patch(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let content_type = match patch_type {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
        };
        let path = object_path(resource, namespace, name, status_only.then_some("status"))?;
        let request = self
            .request(Method::PATCH, &path, &[])
            .header(CONTENT_TYPE, HeaderValue::from_static(content_type))
            .body(patch.to_string());
        self.send_for_object(resource, request).await
    }

    async fn finalize(&self, namespace: Value) -> Result<Value, ApiError> {
        let namespaces = resources::find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::Internal("namespaces are not a served resource".into()))?;
        let path = object_path(namespaces, "", object_name(&namespace), Some("finalize"))?;
        let request = self.request(Method::PUT, &path, &[]).json(&namespace);
        self.send_for_object(namespaces, request).await
    }

    async fn bind(&self, namespace: &str, name: &str, binding: Value) -> Result<(), ApiError> {
        let pods = resources::find("", "v1", "pods")
            .ok_or_else(|| ApiError::Internal("pods are not a served resource".into()))?;
        let path = object_path(pods, namespace, name, Some("binding"))?;
        let request = self.request(Method::POST, &path, &[]).json(&binding);
        self.send(pods, request).await.map(drop)
    }

    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        request: Value,
    ) -> Result<Value, ApiError> {
        let accounts = resources::core("serviceaccounts");
        let path = object_path(accounts, namespace, name, Some("token"))?;
        let request = self.request(Method::POST, &path, &[]).json(&request);
        self.send_for_object(accounts, request).await
    }

    async fn delete(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let path = object_path(resource, namespace, name, None)?;
        let request = self.request(Method::DELETE, &path, &[]).json(&delete_options_body(options));
        self.send_for_object(resource, request).await
    }

    /// The stream ends after an `Error` event, or without one when the server closes the watch
    /// (its timeout): watch again from the last resourceVersion seen.
    async fn watch(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<ClientWatch, ApiError> {
        let mut query = vec![("watch", "true".to_string())];
        if let Some(rv) = &options.resource_version {
            query.push(("resourceVersion", rv.clone()));
        }
        if options.allow_bookmarks {
            query.push(("allowWatchBookmarks", "true".into()));
        }
        if let Some(timeout) = options.timeout {
            // Whole seconds, at least one (zero would ask for the server's default).
            query.push(("timeoutSeconds", timeout.as_secs().max(1).to_string()));
        }
        if let Some(send) = options.send_initial_events {
            query.push(("sendInitialEvents", send.to_string()));
            query.push(("resourceVersionMatch", "NotOlderThan".into()));
        }
        query.extend(selectors(&options.label_selector, &options.field_selector));
        let path = collection_path(resource, namespace)?;
        // No request timeout: a watch lasts as long as the server keeps it open (its
        // `timeoutSeconds`, or the server's cap).
        let response =
            self.request(Method::GET, &path, &query).send().await.map_err(transport_error)?;
        let code = response.status().as_u16();
        if !(200..300).contains(&code) {
            let body = response.bytes().await.map_err(transport_error)?;
            return Err(error_from_response(resource, code, &body));
        }
        let body = response.bytes_stream().map(|chunk| chunk.map_err(|e| error_chain(&e)));
        Ok(watch_events(resource, body))
    }
}

// === paths and bodies ===

fn group_version_prefix(resource: &ResourceType) -> String {
    if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    }
}

/// The collection URL path; `namespace` is ignored for cluster-scoped resources, and `None` or
/// an empty namespace addresses all namespaces.
fn collection_path(resource: &ResourceType, namespace: Option<&str>) -> Result<String, ApiError> {
    let mut path = group_version_prefix(resource);
    if let Some(ns) = namespace.filter(|ns| resource.namespaced && !ns.is_empty()) {
        path.push_str("/namespaces/");
        path.push_str(&segment("namespace", ns)?);
    }
    path.push('/');
    path.push_str(resource.plural);
    Ok(path)
}

/// The path of one object, or of one of its subresources.
fn object_path(
    resource: &ResourceType,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
) -> Result<String, ApiError> {
    // An empty name would address the collection (a DELETE would empty it).
    if name.is_empty() {
        return Err(ApiError::BadRequest(format!("{}: a name is required", resource.plural)));
    }
    let mut path = collection_path(resource, Some(required_namespace(resource, namespace)?))?;
    path.push('/');
    path.push_str(&segment("name", name)?);
    if let Some(sub) = subresource {
        path.push('/');
        path.push_str(sub);
    }
    Ok(path)
}

/// The namespace of a single-object request: required for namespaced resources.
fn required_namespace<'a>(
    resource: &ResourceType,
    namespace: &'a str,
) -> Result<&'a str, ApiError> {
    if resource.namespaced && namespace.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "{} are namespaced: a namespace is required",
            resource.plural
        )));
    }
    Ok(namespace)
}

/// One percent-encoded path segment. Dot segments are refused: URL parsing resolves them away
/// even when percent-encoded, so the request would address another path.
fn segment(what: &str, value: &str) -> Result<String, ApiError> {
    if value == "." || value == ".." {
        return Err(ApiError::BadRequest(format!("{value:?} is not a valid {what}")));
    }
    Ok(utf8_percent_encode(value, SEGMENT).to_string())
}

fn selectors(label: &Option<String>, field: &Option<String>) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(selector) = label.as_ref().filter(|s| !s.is_empty()) {
        query.push(("labelSelector", selector.clone()));
    }
    if let Some(selector) = field.as_ref().filter(|s| !s.is_empty()) {
        query.push(("fieldSelector", selector.clone()));
    }
    query
}

/// A meta/v1 `DeleteOptions` with only the fields that are set.
fn delete_options_body(options: &DeleteOptions) -> Value {
    let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
    if let Some(seconds) = options.grace_period_seconds {
        body["gracePeriodSeconds"] = json!(seconds);
    }
    match (&options.propagation_policy, options.orphan_dependents) {
        (Some(policy), _) => body["propagationPolicy"] = json!(policy),
        (None, Some(orphan)) => body["orphanDependents"] = json!(orphan),
        (None, None) => {}
    }
    let mut preconditions = serde_json::Map::new();
    if let Some(uid) = &options.precondition_uid {
        preconditions.insert("uid".into(), json!(uid));
    }
    if let Some(rv) = &options.precondition_resource_version {
        preconditions.insert("resourceVersion".into(), json!(rv));
    }
    if !preconditions.is_empty() {
        body["preconditions"] = Value::Object(preconditions);
    }
    if options.dry_run {
        body["dryRun"] = json!(["All"]);
    }
    body
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::Internal(format!("the server answered invalid JSON ({e}): {}", excerpt(body)))
    })
}

// === errors ===

/// A request that got no HTTP answer: the server is down, unreachable or too slow.
fn transport_error(error: reqwest::Error) -> ApiError {
    if error.is_builder() {
        ApiError::BadRequest(error_chain(&error))
    } else {
        ApiError::Unavailable(error_chain(&error))
    }
}

/// An error and its sources on one line: reqwest's own message omits the cause.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// A non-2xx answer: a `Status` body maps to its `ApiError`; anything else is `Internal`.
fn error_from_response(resource: &'static ResourceType, code: u16, body: &[u8]) -> ApiError {
    match serde_json::from_slice::<Value>(body) {
        Ok(status) if status.get("kind").and_then(Value::as_str) == Some("Status") => {
            error_from_status(resource, code, &status)
        }
        _ => ApiError::Internal(format!("HTTP {code} without a Status body: {:?}", excerpt(body))),
    }
}

/// The one mapping from a Kubernetes `Status` (a failed response, or a watch ERROR event) to
/// `ApiError`, the inverse of the server's. `resource` is what the request addressed; names in
/// `details` that the resource table knows take precedence (a pod create can fail with a
/// missing namespace).
fn error_from_status(resource: &'static ResourceType, code: u16, status: &Value) -> ApiError {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
    let reason = text(status.get("reason"));
    let mut message = text(status.get("message"));
    if message.is_empty() {
        message = if reason.is_empty() { format!("HTTP {code}") } else { reason.clone() };
    }
    let details = status.get("details");
    let name = text(details.and_then(|d| d.get("name")));
    let detail_group = text(details.and_then(|d| d.get("group")));
    let detail_kind = text(details.and_then(|d| d.get("kind")));
    // NotFound and conflicts name the plural in `details.kind`, Invalid names the Kind.
    let by_plural = RESOURCES
        .iter()
        .find(|r| r.group == detail_group && r.plural == detail_kind)
        .unwrap_or(resource);
    match code {
        404 => ApiError::NotFound { resource: by_plural.plural, group: by_plural.group, name },
        409 if reason == "AlreadyExists" => ApiError::AlreadyExists {
            resource: by_plural.plural,
            group: by_plural.group,
            name,
            being_deleted: false,
        },
        409 => {
            ApiError::Conflict { resource: by_plural.plural, group: by_plural.group, name, message }
        }
        422 => {
            let by_kind = resources::find_by_kind(&detail_group, &detail_kind).unwrap_or(resource);
            let causes = details
                .and_then(|d| d.get("causes"))
                .and_then(Value::as_array)
                .map(|causes| causes.iter().map(field_error).collect())
                .unwrap_or_default();
            ApiError::Invalid { kind: by_kind.kind, group: by_kind.group, name, causes }
        }
        401 | 403 => ApiError::Forbidden(message),
        405 => ApiError::MethodNotAllowed(message),
        410 => ApiError::Expired(message),
        429 | 502..=504 => ApiError::Unavailable(message),
        400..=499 => ApiError::BadRequest(message),
        _ => ApiError::Internal(message),
    }
}

/// Kubernetes' `CauseType` values, so a cause's reason can be kept as a `&'static str`.
const CAUSE_REASONS: &[&str] = &[
    "FieldValueNotFound",
    "FieldValueRequired",
    "FieldValueDuplicate",
    "FieldValueInvalid",
    "FieldValueNotSupported",
    "FieldValueForbidden",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueTypeInvalid",
    "InternalError",
    "UnexpectedServerResponse",
    "FieldManagerConflict",
    "ResourceVersionTooLarge",
];

/// One `details.causes` entry; an unknown reason becomes `FieldValueInvalid`.
fn field_error(cause: &Value) -> FieldError {
    let text = |key: &str| cause.get(key).and_then(Value::as_str).unwrap_or("");
    let reason = text("reason");
    FieldError {
        reason: CAUSE_REASONS
            .iter()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("FieldValueInvalid"),
        field: text("field").to_string(),
        message: text("message").to_string(),
    }
}

fn excerpt(body: &[u8]) -> String {
    let cut = &body[..body.len().min(EXCERPT_BYTES)];
    let mut text = String::from_utf8_lossy(cut).trim().replace(['\n', '\r'], " ");
    if body.len() > EXCERPT_BYTES {
        text.push_str("...");
    }
    text
}

// === watch decoding ===

/// Turns a watch body (chunks cut anywhere) into events. The stream ends after an `Error`
/// event; a broken connection or a truncated last event ends it with `Unavailable`.
fn watch_events<S>(resource: &'static ResourceType, body: S) -> ClientWatch
where
    S: Stream<Item = Result<Bytes, String>> + Send + 'static,
{
    let decoder = WatchDecoder {
        resource,
        body: Box::pin(body),
        buffer: BytesMut::new(),
        scanned: 0,
        done: false,
    };
    futures::stream::unfold(decoder, |mut decoder| async move {
        let event = decoder.next_event().await?;
        Some((event, decoder))
    })
    .boxed()
}

struct WatchDecoder {
    resource: &'static ResourceType,
    body: Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>,
    buffer: BytesMut,
    /// How much of `buffer` is known to hold no newline.
    scanned: usize,
    done: bool,
}

impl WatchDecoder {
    async fn next_event(&mut self) -> Option<ClientEvent> {
        while !self.done {
            if let Some(offset) = self.buffer[self.scanned..].iter().position(|b| *b == b'\n') {
                let line = self.buffer.split_to(self.scanned + offset + 1);
                self.scanned = 0;
                if line.trim_ascii().is_empty() {
                    continue;
                }
                return Some(self.emit(decode_event(self.resource, &line)));
            }
            self.scanned = self.buffer.len();
            match self.body.next().await {
                Some(Ok(chunk)) => {
                    self.buffer.extend_from_slice(&chunk);
                    if self.buffer.len() > MAX_EVENT_BYTES {
                        return Some(self.emit(ClientEvent::Error(ApiError::Internal(format!(
                            "a watch event is larger than {MAX_EVENT_BYTES} bytes"
                        )))));
                    }
                }
                Some(Err(e)) => {
                    return Some(self.emit(ClientEvent::Error(ApiError::Unavailable(format!(
                        "the watch connection broke: {e}"
                    )))))
                }
                None => {
                    self.done = true;
                    let rest = std::mem::take(&mut self.buffer);
                    if rest.trim_ascii().is_empty() {
                        return None;
                    }
                    // A last event without its newline is still an event if it is complete.
                    return Some(match serde_json::from_slice::<Value>(&rest) {
                        Ok(_) => decode_event(self.resource, &rest),
                        Err(_) => ClientEvent::Error(ApiError::Unavailable(
                            "the watch connection closed in the middle of an event".into(),
                        )),
                    });
                }
            }
        }
        None
    }

    /// Nothing follows an error event.
    fn emit(&mut self, event: ClientEvent) -> ClientEvent {
        if matches!(event, ClientEvent::Error(_)) {
            self.done = true;
        }
        event
    }
}

#[derive(serde::Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    object: Value,
}

fn decode_event(resource: &'static ResourceType, line: &[u8]) -> ClientEvent {
    let event: WireEvent = match serde_json::from_slice(line) {
        Ok(event) => event,
        Err(e) => {
            return ClientEvent::Error(ApiError::Internal(format!(
                "malformed watch event ({e}): {:?}",
                excerpt(line)
            )))
        }
    };
    let object = event.object;
    match event.kind.as_str() {
        "ADDED" => ClientEvent::Object(EventType::Added, object),
        "MODIFIED" => ClientEvent::Object(EventType::Modified, object),
        "DELETED" => ClientEvent::Object(EventType::Deleted, object),
        "BOOKMARK" => ClientEvent::Bookmark {
            resource_version: object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        },
        "ERROR" => {
            let code = object
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500);
            ClientEvent::Error(error_from_status(resource, code, &object))
        }
        other => {
            ClientEvent::Error(ApiError::Internal(format!("unknown watch event type {other:?}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::executor::block_on;
    use futures::stream;
    use serde_json::json;

    use super::*;
    use crate::config::Settings;
    use crate::daemon;

    /// Every wait on the server is bounded by this.
    const WAIT: Duration = Duration::from_secs(10);

    fn resource(plural: &str) -> &'static ResourceType {
        RESOURCES.iter().find(|r| r.plural == plural).expect("a served resource")
    }

    fn pod(name: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
    }

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().map(object_name).collect()
    }

    /// A real server (in this actix system) on a free port with a temp data dir.
    struct TestServer {
        client: RestClient,
        handle: actix_web::dev::ServerHandle,
        serving: tokio::task::JoinHandle<std::io::Result<()>>,
        _data: tempfile::TempDir,
    }

    impl TestServer {
        async fn start(configure: impl FnOnce(&mut Settings)) -> Self {
            let data = tempfile::tempdir().expect("a temp dir");
            let mut settings = Settings::for_tests(data.path());
            configure(&mut settings);
            let running = daemon::start(&settings).await.expect("the server starts");
            let client = RestClient::new(&format!("http://{}", running.insecure_addr))
                .expect("a client for the server");
            let handle = running.server.handle();
            let serving = actix::spawn(running.serve());
            Self { client, handle, serving, _data: data }
        }

        fn api(&self) -> &dyn ApiClient {
            &self.client
        }

        /// Stops the server and checks that it shut down cleanly.
        async fn stop(self) {
            // Idle keep-alive connections would hold up a graceful stop: close them first.
            drop(self.client);
            self.handle.stop(true).await;
            self.serving.await.expect("the serve task").expect("a clean shutdown");
        }
    }

    async fn next_event(watch: &mut ClientWatch) -> Option<ClientEvent> {
        tokio::time::timeout(WAIT, watch.next()).await.expect("a watch event in time")
    }

    #[actix_web::test]
    async fn client_crud_round_trips_through_the_server() {
        let server = TestServer::start(|_| {}).await;
        let api = server.api();
        let pods = resource("pods");
        let created = api.create(pods, "default", pod("web", json!({"app": "web"}))).await.unwrap();
        assert_eq!(created["metadata"]["namespace"], "default");
        assert_eq!(created["spec"]["restartPolicy"], "Always", "defaults were applied");
        api.create(pods, "default", pod("db", json!({"app": "db"}))).await.unwrap();
        let got = api.get(pods, "default", "web").await.unwrap();
        assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);

        let by_label = ListOptions { label_selector: Some("app=web".into()), ..Default::default() };
        let list = api.list(pods, Some("default"), &by_label).await.unwrap();
        assert_eq!(names(&list.items), ["web"]);
        assert!(!list.resource_version.is_empty());
        let by_field =
            ListOptions { field_selector: Some("metadata.name=db".into()), ..Default::default() };
        assert_eq!(names(&api.list(pods, None, &by_field).await.unwrap().items), ["db"]);
        let page = ListOptions { limit: Some(1), ..Default::default() };
        let first = api.list(pods, None, &page).await.unwrap();
        let token = first.continue_token.clone().expect("a second page");
        let next = ListOptions { continue_token: Some(token), ..page };
        let second = api.list(pods, None, &next).await.unwrap();
        assert_eq!((first.items.len(), second.items.len()), (1, 1));
        assert_ne!(names(&first.items), names(&second.items));
        assert_eq!(second.continue_token, None);

        let mut changed = got.clone();
        changed["metadata"]["annotations"] = json!({"note": "x"});
        let updated = api.update(pods, "default", changed).await.unwrap();
        assert_eq!(updated["metadata"]["annotations"]["note"], "x");
        let stale = api.update(pods, "default", got).await.unwrap_err();
        assert!(matches!(stale, ApiError::Conflict { resource: "pods", .. }), "{stale:?}");

        let mut status = updated.clone();
        status["status"]["phase"] = json!("Running");
        let after = api.update_status(pods, "default", status).await.unwrap();
        assert_eq!(after["status"]["phase"], "Running");

        let labels = json!({"metadata": {"labels": {"tier": "front"}}});
        let merged =
            api.patch(pods, "default", "web", PatchType::Merge, &labels, false).await.unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"app": "web", "tier": "front"}));
        let image = json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        let strategic = api
            .patch(pods, "default", "web", PatchType::StrategicMerge, &image, false)
            .await
            .unwrap();
        assert_eq!(strategic["spec"]["containers"][0]["image"], "nginx:2");
        assert_eq!(strategic["spec"]["containers"][0]["name"], "c");
        let ops = json!([{"op": "add", "path": "/metadata/annotations/via", "value": "json"}]);
        let patched =
            api.patch(pods, "default", "web", PatchType::Json, &ops, false).await.unwrap();
        assert_eq!(patched["metadata"]["annotations"]["via"], "json");
        let phase = json!({"status": {"phase": "Succeeded"}});
        let patched =
            api.patch(pods, "default", "web", PatchType::Merge, &phase, true).await.unwrap();
        assert_eq!(patched["status"]["phase"], "Succeeded");

        let wrong_uid =
            DeleteOptions { precondition_uid: Some("not-the-uid".into()), ..Default::default() };
        let refused = api.delete(pods, "default", "web", &wrong_uid).await.unwrap_err();
        assert!(matches!(refused, ApiError::Conflict { resource: "pods", .. }), "{refused:?}");
        let uid = created["metadata"]["uid"].as_str().map(String::from);
        let right_uid = DeleteOptions {
            precondition_uid: uid,
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        api.delete(pods, "default", "web", &right_uid).await.unwrap();
        let missing = api.get(pods, "default", "web").await.unwrap_err();
        assert!(
            matches!(&missing, ApiError::NotFound { resource: "pods", group: "", name } if name == "web"),
            "{missing:?}"
        );
        server.stop().await;
    }

    #[actix_web::test]
    async fn client_failures_map_to_the_in_process_errors() {
        let server = TestServer::start(|_| {}).await;
        let api = server.api();
        let pods = resource("pods");
        api.create(pods, "default", pod("p", json!({}))).await.unwrap();
        let duplicate = api.create(pods, "default", pod("p", json!({}))).await.unwrap_err();
        assert!(
            matches!(&duplicate, ApiError::AlreadyExists { resource: "pods", name, .. } if name == "p"),
            "{duplicate:?}"
        );
        let bad = json!({"metadata": {"name": "bad"}, "spec": {"containers": []}});
        match api.create(pods, "default", bad).await.unwrap_err() {
            ApiError::Invalid { kind: "Pod", group: "", name, causes } => {
                assert_eq!(name, "bad");
                assert!(
                    causes.iter().any(|c| c.field == "spec.containers"
                        && c.reason == "FieldValueRequired"
                        && !c.message.is_empty()),
                    "{causes:?}"
                );
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        let missing = api.get(pods, "default", "nope").await.unwrap_err();
        assert!(matches!(missing, ApiError::NotFound { resource: "pods", .. }), "{missing:?}");
        let no_namespace = api.create(pods, "nowhere", pod("q", json!({}))).await.unwrap_err();
        assert!(
            matches!(&no_namespace, ApiError::NotFound { resource: "namespaces", name, .. } if name == "nowhere"),
            "{no_namespace:?}"
        );
        // Requests that would address something else are refused before they are sent.
        let unnamed = api.delete(pods, "default", "", &DeleteOptions::default()).await;
        assert!(matches!(unnamed, Err(ApiError::BadRequest(_))), "{unnamed:?}");
        assert!(matches!(api.get(pods, "", "p").await, Err(ApiError::BadRequest(_))));

        // Cluster-scoped resources and named groups have their own paths.
        let namespaces = resource("namespaces");
        api.create(namespaces, "", json!({"metadata": {"name": "team-a"}})).await.unwrap();
        assert_eq!(object_name(&api.get(namespaces, "", "team-a").await.unwrap()), "team-a");
        let leases = resource("leases");
        assert_eq!(leases.group, "coordination.k8s.io");
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}});
        api.create(leases, "team-a", lease).await.unwrap();
        let got = api.get(leases, "team-a", "l").await.unwrap();
        assert_eq!(got["spec"]["holderIdentity"], "me");
        let gone = api.get(leases, "default", "l").await.unwrap_err();
        assert!(
            matches!(
                gone,
                ApiError::NotFound { resource: "leases", group: "coordination.k8s.io", .. }
            ),
            "{gone:?}"
        );
        server.stop().await;
    }

    #[actix_web::test]
    async fn client_watch_sees_changes_in_order() {
        // The server ends watches after a few seconds, so the graceful stop does not wait
        // for the dropped ones (the server only notices a gone client when it writes).
        let server = TestServer::start(|s| s.watch_max_timeout = Duration::from_secs(5)).await;
        let api = server.api();
        let cms = resource("configmaps");
        api.create(cms, "default", json!({"metadata": {"name": "before"}})).await.unwrap();
        let listed = api.list(cms, Some("default"), &ListOptions::default()).await.unwrap();
        let from_list = WatchOptions {
            resource_version: Some(listed.resource_version.clone()),
            ..Default::default()
        };
        let mut watch = api.watch(cms, Some("default"), &from_list).await.unwrap();

        let created = api.create(cms, "default", json!({"metadata": {"name": "w"}})).await.unwrap();
        let mut changed = created.clone();
        changed["data"] = json!({"k": "v"});
        api.update(cms, "default", changed).await.unwrap();
        api.delete(cms, "default", "w", &DeleteOptions::default()).await.unwrap();
        let mut seen = Vec::new();
        let mut last_rv = listed.resource_version.parse::<u64>().unwrap();
        for _ in 0..3 {
            match next_event(&mut watch).await {
                Some(ClientEvent::Object(kind, object)) => {
                    assert_eq!(object_name(&object), "w");
                    let rv = object["metadata"]["resourceVersion"].as_str().unwrap();
                    let rv: u64 = rv.parse().unwrap();
                    assert!(rv > last_rv, "resourceVersions increase");
                    last_rv = rv;
                    seen.push(kind.as_str());
                }
                other => panic!("expected an object event, got {other:?}"),
            }
        }
        assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED"]);
        let end = next_event(&mut watch).await;
        assert!(end.is_none(), "a watch the server closes ends without an error: {end:?}");

        let initial = WatchOptions {
            send_initial_events: Some(true),
            allow_bookmarks: true,
            field_selector: Some("metadata.name=before".into()),
            ..Default::default()
        };
        let mut watch = api.watch(cms, Some("default"), &initial).await.unwrap();
        match next_event(&mut watch).await {
            Some(ClientEvent::Object(EventType::Added, object)) => {
                assert_eq!(object_name(&object), "before")
            }
            other => panic!("expected the initial ADDED, got {other:?}"),
        }
        match next_event(&mut watch).await {
            Some(ClientEvent::Bookmark { resource_version }) => {
                assert!(resource_version.parse::<u64>().unwrap() >= last_rv)
            }
            other => panic!("expected the end-of-initial-events bookmark, got {other:?}"),
        }
        drop(watch);
        server.stop().await;
    }

    #[actix_web::test]
    async fn client_watch_asks_for_its_timeout_and_gets_a_last_bookmark() {
        let server = TestServer::start(|_| {}).await;
        let api = server.api();
        let cms = resource("configmaps");
        let listed = api.list(cms, Some("default"), &ListOptions::default()).await.unwrap();
        let timed = WatchOptions {
            resource_version: Some(listed.resource_version.clone()),
            allow_bookmarks: true,
            timeout: Some(Duration::from_secs(3)),
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let mut watch = api.watch(cms, Some("default"), &timed).await.unwrap();
        match next_event(&mut watch).await {
            Some(ClientEvent::Bookmark { resource_version }) => {
                let (at, listed) = (resource_version.parse::<u64>(), &listed.resource_version);
                assert!(at.unwrap() >= listed.parse::<u64>().unwrap(), "{listed}");
            }
            other => panic!("expected the last bookmark before the timeout, got {other:?}"),
        }
        assert!(next_event(&mut watch).await.is_none(), "the watch ends at its timeout");
        let lasted = started.elapsed();
        assert!(lasted >= Duration::from_millis(2900) && lasted < WAIT, "{lasted:?}");
        server.stop().await;
    }

    #[actix_web::test]
    async fn client_watch_from_beyond_the_window_is_expired() {
        let server = TestServer::start(|s| s.watch_window_events = 2).await;
        let api = server.api();
        let cms = resource("configmaps");
        let first = api.create(cms, "default", json!({"metadata": {"name": "c0"}})).await.unwrap();
        for i in 1..6 {
            api.create(cms, "default", json!({"metadata": {"name": format!("c{i}")}}))
                .await
                .unwrap();
        }
        let rv = first["metadata"]["resourceVersion"].as_str().map(String::from);
        let old = WatchOptions { resource_version: rv, ..Default::default() };
        let mut watch = api.watch(cms, Some("default"), &old).await.unwrap();
        match next_event(&mut watch).await {
            Some(ClientEvent::Error(ApiError::Expired(message))) => {
                assert!(message.contains("too old"), "{message}")
            }
            other => panic!("expected Expired, got {other:?}"),
        }
        assert!(next_event(&mut watch).await.is_none(), "nothing follows an error");
        server.stop().await;
    }

    #[actix_web::test]
    async fn client_binds_a_pod_once() {
        let server = TestServer::start(|_| {}).await;
        let api = server.api();
        let pods = resource("pods");
        api.create(pods, "default", pod("p", json!({}))).await.unwrap();
        let mut binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
        api.bind("default", "p", binding.clone()).await.unwrap();
        assert_eq!(api.get(pods, "default", "p").await.unwrap()["spec"]["nodeName"], "n1");
        let again = api.bind("default", "p", binding.clone()).await.unwrap_err();
        assert!(matches!(again, ApiError::Conflict { resource: "pods", .. }), "{again:?}");
        binding["metadata"]["name"] = json!("nope");
        let missing = api.bind("default", "nope", binding).await.unwrap_err();
        assert!(matches!(missing, ApiError::NotFound { resource: "pods", .. }), "{missing:?}");
        server.stop().await;
    }

    #[actix_web::test]
    async fn client_without_a_server_is_unavailable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let client = RestClient::new(&format!("http://127.0.0.1:{port}")).unwrap();
        let api: &dyn ApiClient = &client;
        let pods = resource("pods");
        let error = api.get(pods, "default", "p").await.unwrap_err();
        assert!(matches!(error, ApiError::Unavailable(_)), "{error:?}");
        match api.watch(pods, None, &WatchOptions::default()).await {
            Err(ApiError::Unavailable(_)) => {}
            Err(other) => panic!("expected Unavailable, got {other:?}"),
            Ok(_) => panic!("a watch without a server"),
        }
    }

    #[test]
    fn client_accepts_only_plain_http_urls() {
        for good in ["http://127.0.0.1:8080", "http://localhost:8080/", "http://[::1]:80"] {
            assert!(RestClient::new(good).is_ok(), "{good}");
        }
        assert_eq!(
            &*RestClient::new("http://localhost:8080/").unwrap().base,
            "http://localhost:8080"
        );
        assert!(matches!(
            RestClient::new("https://127.0.0.1:6443"),
            Err(RestClientError::HttpsUnsupported(_))
        ));
        for bad in [
            "",
            "garbage",
            "localhost:8080",
            "ftp://host",
            "http://",
            "http://h:1/api",
            "http://u:p@h:1",
            "http://h:1?x=1",
            "http://h:99999",
        ] {
            let error = RestClient::new(bad).expect_err(bad);
            assert!(matches!(error, RestClientError::InvalidUrl { .. }), "{bad}: {error}");
        }
    }

    #[test]
    fn client_paths_follow_the_kubernetes_layout() {
        let (pods, nodes, leases) = (resource("pods"), resource("nodes"), resource("leases"));
        assert_eq!(collection_path(pods, None).unwrap(), "/api/v1/pods");
        assert_eq!(collection_path(pods, Some("")).unwrap(), "/api/v1/pods");
        assert_eq!(collection_path(pods, Some("ns")).unwrap(), "/api/v1/namespaces/ns/pods");
        assert_eq!(collection_path(nodes, Some("ns")).unwrap(), "/api/v1/nodes");
        assert!(collection_path(pods, Some("..")).is_err());
        assert_eq!(
            object_path(leases, "kube-node-lease", "n1", None).unwrap(),
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
        );
        assert_eq!(
            object_path(nodes, "", "n1", Some("status")).unwrap(),
            "/api/v1/nodes/n1/status"
        );
        assert_eq!(
            object_path(pods, "a b", "x/y?", None).unwrap(),
            "/api/v1/namespaces/a%20b/pods/x%2Fy%3F"
        );
        assert!(object_path(pods, "ns", "..", None).is_err());
        assert!(object_path(pods, "", "p", None).is_err());
    }

    #[test]
    fn client_delete_options_carry_only_what_is_set() {
        let empty = delete_options_body(&DeleteOptions::default());
        assert_eq!(empty, json!({"kind": "DeleteOptions", "apiVersion": "v1"}));
        let full = delete_options_body(&DeleteOptions {
            precondition_uid: Some("u".into()),
            precondition_resource_version: Some("7".into()),
            grace_period_seconds: Some(0),
            propagation_policy: Some("Foreground".into()),
            dry_run: true,
            orphan_dependents: None,
        });
        assert_eq!(
            full,
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                "propagationPolicy": "Foreground",
                "preconditions": {"uid": "u", "resourceVersion": "7"}, "dryRun": ["All"]})
        );
    }

    #[test]
    fn client_maps_statuses_to_api_errors() {
        let pods = resource("pods");
        let status = |code: u16, reason: &str, details: Value| {
            let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "the message", "reason": reason, "code": code, "details": details});
            error_from_response(pods, code, body.to_string().as_bytes())
        };
        let e = status(404, "NotFound", json!({"name": "ns1", "kind": "namespaces"}));
        assert!(matches!(e, ApiError::NotFound { resource: "namespaces", group: "", .. }), "{e:?}");
        let e = status(404, "NotFound", json!({"name": "x", "kind": "widgets", "group": "ex.com"}));
        assert!(matches!(e, ApiError::NotFound { resource: "pods", group: "", .. }), "{e:?}");
        let e = status(409, "AlreadyExists", json!({"name": "p", "kind": "pods"}));
        assert!(matches!(e, ApiError::AlreadyExists { resource: "pods", .. }), "{e:?}");
        let e = status(409, "Conflict", json!({"name": "p", "kind": "pods"}));
        assert!(matches!(&e, ApiError::Conflict { message, .. } if message == "the message"));
        let causes = json!([{"reason": "FieldValueRequired", "field": "spec.x", "message": "m"},
            {"reason": "SomethingNew", "field": "spec.y"}]);
        match status(422, "Invalid", json!({"name": "p", "kind": "Pod", "causes": causes})) {
            ApiError::Invalid { kind: "Pod", causes, .. } => {
                assert_eq!(
                    causes[0],
                    FieldError {
                        reason: "FieldValueRequired",
                        field: "spec.x".into(),
                        message: "m".into()
                    }
                );
                assert_eq!(
                    (causes[1].reason, causes[1].field.as_str()),
                    ("FieldValueInvalid", "spec.y")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(status(400, "BadRequest", Value::Null), ApiError::BadRequest(_)));
        assert!(matches!(status(403, "Forbidden", Value::Null), ApiError::Forbidden(_)));
        assert!(matches!(
            status(405, "MethodNotAllowed", Value::Null),
            ApiError::MethodNotAllowed(_)
        ));
        assert!(matches!(status(410, "Expired", Value::Null), ApiError::Expired(_)));
        assert!(matches!(status(429, "TooManyRequests", Value::Null), ApiError::Unavailable(_)));
        assert!(matches!(status(503, "ServiceUnavailable", Value::Null), ApiError::Unavailable(_)));
        assert!(matches!(status(500, "InternalError", Value::Null), ApiError::Internal(_)));
        match error_from_response(pods, 502, b"<html>\n<b>bad gateway</b></html>") {
            ApiError::Internal(message) => {
                assert!(message.contains("502") && message.contains("bad gateway"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let long = vec![b'x'; 10_000];
        let ApiError::Internal(message) = error_from_response(pods, 500, &long) else {
            panic!("a non-Status body is Internal")
        };
        assert!(message.len() < 300, "only an excerpt is quoted");
    }

    fn decode(chunks: Vec<Result<&'static [u8], &'static str>>) -> Vec<ClientEvent> {
        let chunks: Vec<Result<Bytes, String>> =
            chunks.into_iter().map(|c| c.map(Bytes::from_static).map_err(String::from)).collect();
        block_on(watch_events(resource("configmaps"), stream::iter(chunks)).collect())
    }

    #[test]
    fn client_watch_lines_split_across_chunks_are_reassembled() {
        let stream: &'static [u8] =
            b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n\
            {\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n";
        let expect = |events: &[ClientEvent]| {
            assert_eq!(events.len(), 2, "{events:?}");
            assert!(
                matches!(&events[0], ClientEvent::Object(EventType::Added, o) if object_name(o) == "a"),
                "{events:?}"
            );
            assert!(
                matches!(&events[1], ClientEvent::Bookmark { resource_version } if resource_version == "9")
            );
        };
        // Cut in the middle of a line, and at every single byte.
        expect(&decode(vec![Ok(&stream[..10]), Ok(&stream[10..60]), Ok(&stream[60..])]));
        expect(&decode(stream.chunks(1).map(Ok).collect()));
        // A broken connection ends the stream with Unavailable.
        let broken = decode(vec![Ok(&stream[..60]), Err("connection reset by peer")]);
        assert_eq!(broken.len(), 2, "{broken:?}");
        assert!(
            matches!(&broken[1], ClientEvent::Error(ApiError::Unavailable(m)) if m.contains("reset"))
        );
        // So does a connection closed in the middle of an event.
        let cut = decode(vec![Ok(&stream[..60])]);
        assert!(matches!(&cut[1], ClientEvent::Error(ApiError::Unavailable(_))), "{cut:?}");
    }

    #[test]
    fn client_watch_errors_end_the_stream() {
        let events = decode(vec![Ok(b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\
            \"code\":410,\"reason\":\"Expired\",\"message\":\"too old resource version\"}}\n\
            {\"type\":\"ADDED\",\"object\":{}}\n")]);
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(
            matches!(&events[0], ClientEvent::Error(ApiError::Expired(m)) if m.contains("too old"))
        );
        let events = decode(vec![Ok(b"not json\n{\"type\":\"ADDED\",\"object\":{}}\n")]);
        assert!(
            matches!(events.as_slice(), [ClientEvent::Error(ApiError::Internal(_))]),
            "{events:?}"
        );
        let events = decode(vec![Ok(b"{\"type\":\"SURPRISE\",\"object\":{}}\n")]);
        assert!(
            matches!(events.as_slice(), [ClientEvent::Error(ApiError::Internal(_))]),
            "{events:?}"
        );
    }
}

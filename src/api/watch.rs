//! Watch over HTTP: a chunked stream of newline-delimited JSON events.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse};
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use kplane_actors::core::{ApiCore, ApiError, WatchFrame};
use kplane_actors::model::ResourceType;
use kplane_actors::model::{FieldError, FieldSelector};
use serde_json::{json, Value};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::media::{self, Conversion};
use super::objects::include_object;
use super::params::Query;
use super::partial;
use super::table::{self, IncludeObject};
use super::AppState;
use crate::error::{status_of, HttpError};

/// The annotation of the initial-events-end bookmark that carries the list's blueprint.
const LIST_BLUEPRINT: &str = "kubernetes.io/initial-events-list-blueprint";

/// What Kubernetes refuses in a watch's `sendInitialEvents` and `resourceVersionMatch`: the
/// first asks for the second to be `NotOlderThan`, and the second is for the first only.
fn watch_option_errors(query: &Query) -> Vec<FieldError> {
    const NOT_OLDER_THAN: &str = "NotOlderThan";
    let send_initial_events = query.get("sendInitialEvents").is_some();
    let matching = query.get("resourceVersionMatch").filter(|m| !m.is_empty());
    let mut causes = Vec::new();
    if send_initial_events && matching != Some(NOT_OLDER_THAN) {
        let message = "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
        causes.push(FieldError::forbidden("resourceVersionMatch", message));
    }
    if let Some(matching) = matching {
        if !send_initial_events {
            let message = "resourceVersionMatch is forbidden for watch unless sendInitialEvents \
                           is provided";
            causes.push(FieldError::forbidden("resourceVersionMatch", message));
        }
        if matching != NOT_OLDER_THAN {
            let supported = [NOT_OLDER_THAN];
            causes.push(FieldError::not_supported("resourceVersionMatch", matching, &supported));
        }
        if query.get("continue").is_some_and(|c| !c.is_empty()) {
            let message = "resourceVersionMatch is forbidden when continue is provided";
            causes.push(FieldError::forbidden("resourceVersionMatch", message));
        }
    }
    causes
}

/// Watches a collection, or the one object `name` of it (`/watch/.../pods/{name}`, or `GET
/// .../pods/{name}?watch=true`), which is the collection's watch narrowed to that name, as in
/// Kubernetes.
pub async fn serve(
    req: &HttpRequest,
    core: &ApiCore,
    resource: &'static ResourceType,
    namespace: Option<&str>,
    name: Option<&str>,
    query: &Query,
    state: &AppState,
) -> Result<HttpResponse, HttpError> {
    let mut options = query.watch_options()?;
    let causes = watch_option_errors(query);
    if !causes.is_empty() {
        return Err(HttpError::Api(ApiError::invalid_options("ListOptions", causes)));
    }
    if let Some(name) = name {
        // As kube-apiserver: a field selector given with a name must select that name.
        let given = options.field_selector.take().filter(|fields| !fields.trim().is_empty());
        if given.as_deref().is_some_and(|fields| !selects_name(fields, resource, name)) {
            return Err(HttpError::Api(ApiError::BadRequest(
                "fieldSelector metadata.name doesn't match requested name".into(),
            )));
        }
        options.field_selector = Some(given.unwrap_or_else(|| format!("metadata.name={name}")));
    }
    // Zero, like no timeout, leaves it to the server, which picks one at random between half
    // its limit and the limit (kube-apiserver: between its minimum request timeout and twice
    // that), so that watches opened together do not all end, and come back, together; a
    // negative one has run out already (an empty watch, as in Kubernetes).
    let timeout = match query.number("timeoutSeconds")? {
        Some(t) if t < 0 => Duration::ZERO,
        Some(t) if t > 0 => Duration::from_secs(t as u64).min(state.watch_max_timeout),
        _ => unnamed_timeout(state.watch_max_timeout, rand::random()),
    };
    options.timeout = Some(timeout);
    // A list's metadata is not a watch event's: the events stay whole (kube-apiserver fails
    // to convert them too).
    let conversion = match media::conversion(req, true) {
        Conversion::MetadataList(_) => Conversion::None,
        conversion => conversion,
    };
    let include = match conversion {
        Conversion::Table(_) => include_object(query)?,
        _ => IncludeObject::Metadata,
    };
    let frames = match core.watch(resource, namespace, &options).await {
        // Admitted, a watch whose resourceVersion the store has not reached ends with an
        // ERROR event (kube-apiserver's watch cache answers so), not an error response.
        Err(error @ ApiError::TooLargeResourceVersion { .. }) => {
            Box::pin(futures::stream::once(async { WatchFrame::Error(error) }))
        }
        frames => frames?,
    };
    let encoded = frames
        .scan(false, |ended, frame| {
            // Nothing follows an ERROR event.
            if *ended {
                return futures::future::ready(None);
            }
            *ended = matches!(frame, WatchFrame::Error(_));
            futures::future::ready(Some(frame))
        })
        .map({
            // As Kubernetes' watch encoder: a Table's column definitions come with the first
            // event only (`null` in the rest).
            let mut headers = true;
            move |frame| {
                let event = matches!(frame, WatchFrame::Event(..));
                let bytes = encode(resource, frame, conversion, include, headers);
                headers &= !event;
                Ok::<Bytes, actix_web::Error>(bytes)
            }
        });
    let encoded = crate::peer::until_gone(req, encoded);
    // JSON, whatever the events were converted to, as kube-apiserver labels a watch.
    Ok(HttpResponse::Ok().content_type("application/json").streaming(encoded))
}

/// Whether a field selector requires `metadata.name` to be `name` (an `=` or `==` term on it),
/// as `RequiresExactMatch` reads it. One that does not parse is let through, to be refused
/// with its own error where the watch's selectors are read.
fn selects_name(fields: &str, resource: &ResourceType, name: &str) -> bool {
    FieldSelector::parse(fields, resource)
        .map_or(true, |selector| selector.required_value("metadata.name") == Some(name))
}

fn encode(
    resource: &'static ResourceType,
    frame: WatchFrame,
    conversion: Conversion,
    include: IncludeObject,
    headers: bool,
) -> Bytes {
    let mut out = BytesMut::new();
    match frame {
        WatchFrame::Event(kind, object) => {
            out.put_slice(b"{\"type\":\"");
            out.put_slice(kind.as_str().as_bytes());
            out.put_slice(b"\",\"object\":");
            match conversion {
                Conversion::Table(version) => {
                    let mut t = table::table_of_one(resource, &object, include);
                    if !headers {
                        t["columnDefinitions"] = Value::Null;
                    }
                    out.put_slice(table::in_version(t, version).to_string().as_bytes());
                }
                Conversion::Metadata(version) => {
                    let partial = partial::of_object(&object, version);
                    out.put_slice(partial.to_string().as_bytes());
                }
                _ => out.put_slice(&object.raw),
            }
            out.put_slice(b"}\n");
        }
        WatchFrame::Bookmark { resource_version, initial_events_end } => {
            // As Kubernetes serializes a bookmark's empty object: a zero creation time is null.
            let mut metadata = json!({"resourceVersion": resource_version.to_string(),
                "creationTimestamp": null});
            if initial_events_end {
                metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                if matches!(conversion, Conversion::None) {
                    // What a watch-list client builds its list from: the empty list of the
                    // kind, encoded as the stream's objects are.
                    let blueprint = json!({"kind": resource.list_kind,
                        "apiVersion": resource.api_version(), "metadata": {}, "items": null});
                    let encoded = BASE64.encode(format!("{blueprint}\n"));
                    metadata["annotations"][LIST_BLUEPRINT] = json!(encoded);
                }
            }
            let object = match conversion {
                Conversion::Metadata(version) => partial::of_metadata(metadata, version),
                _ => json!({"kind": resource.kind, "apiVersion": resource.api_version(),
                    "metadata": metadata}),
            };
            let event = json!({"type": "BOOKMARK", "object": object});
            out.put_slice(event.to_string().as_bytes());
            out.put_u8(b'\n');
        }
        WatchFrame::Error(error) => {
            let (_, status) = status_of(&HttpError::Api(error));
            out.put_slice(json!({"type": "ERROR", "object": status}).to_string().as_bytes());
            out.put_u8(b'\n');
        }
    }
    out.freeze()
}

/// The timeout of a watch that names none: between half of `limit` and `limit`, where `draw`
/// (in 0..1) falls.
fn unnamed_timeout(limit: Duration, draw: f64) -> Duration {
    limit.mul_f64(draw.clamp(0.0, 1.0).mul_add(0.5, 0.5))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn a_watch_naming_no_timeout_ends_between_half_the_limit_and_the_limit() {
        let limit = Duration::from_secs(3600);
        assert_eq!(super::unnamed_timeout(limit, 0.0), Duration::from_secs(1800));
        assert_eq!(super::unnamed_timeout(limit, 0.5), Duration::from_secs(2700));
        assert!(super::unnamed_timeout(limit, 0.999_999) <= limit);
    }

    #[test]
    fn a_field_selector_selects_a_name_with_an_equality_term() {
        let maps = kplane_actors::model::resources::find("", "v1", "configmaps").unwrap();
        let selects_name = |fields: &str, name: &str| super::selects_name(fields, maps, name);
        assert!(selects_name("metadata.name=a", "a"));
        assert!(selects_name("metadata.name==a,metadata.namespace=n", "a"));
        assert!(!selects_name("metadata.name=b", "a"));
        assert!(!selects_name("metadata.name!=a", "a"));
        assert!(!selects_name("metadata.namespace=n", "a"));
    }
}

//! Response media types of the API's paths, negotiated from `Accept` as kube-apiserver does:
//! JSON, compact or indented (`?pretty=true`, `pretty=1` in `Accept`, or a curl, Wget or
//! browser user agent, as Kubernetes prints for them), YAML (not for watches), and 406
//! `NotAcceptable` when `Accept` admits none of the API's media types. Handlers write JSON;
//! this middleware re-encodes the few responses asked for otherwise, so the common case
//! costs one look at two headers.
//!
//! A client that asks only for protobuf gets JSON, as before: kplane does not encode protobuf,
//! and the clients that ask for it (client-go, kubectl) read the answer's `Content-Type`.

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpRequest, ResponseError};

use super::params::Query;
use crate::error::HttpError;

/// The media types a response can be asked for in, as kube-apiserver lists them.
pub const RESPONSE_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";
/// What a watch streams in.
pub const STREAM_MEDIA_TYPES: &str = "application/json, application/vnd.kubernetes.protobuf";

/// How a response is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    PrettyJson,
    Yaml,
}

/// One entry of `Accept`: its type and whether it asks for indented output.
struct MediaRange<'a> {
    essence: &'a str,
    quality: f32,
    pretty: bool,
}

fn ranges(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let essence = parts.next().filter(|e| !e.is_empty())?;
            let (mut quality, mut pretty) = (1.0, false);
            for param in parts {
                match param.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                    Some(("q", q)) => quality = q.parse().unwrap_or(1.0),
                    Some(("pretty", p)) => pretty = p == "1",
                    _ => {}
                }
            }
            Some(MediaRange { essence, quality, pretty })
        })
        .filter(|r| r.quality > 0.0)
        .collect();
    ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality)); // stable: ties keep their order
    ranges
}

/// What `Accept` asks a response to be written in (`streaming`: a watch).
pub fn negotiate(req: &HttpRequest, streaming: bool) -> Result<Encoding, HttpError> {
    let accept = req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or("");
    if matches!(accept, "" | "application/json" | "*/*") && !pretty_asked(req) {
        return Ok(Encoding::Json);
    }
    let ranges = ranges(accept);
    if ranges.is_empty() {
        return Ok(if pretty_asked(req) { Encoding::PrettyJson } else { Encoding::Json });
    }
    const JSON_TYPES: &[&str] =
        &["application/json", "application/vnd.kubernetes.protobuf", "application/*", "*/*"];
    for range in ranges {
        let is = |essence: &str| range.essence.eq_ignore_ascii_case(essence);
        if is("application/yaml") && !streaming {
            return Ok(Encoding::Yaml);
        }
        if JSON_TYPES.iter().any(|json| is(json)) {
            let pretty = range.pretty || pretty_asked(req);
            return Ok(if pretty { Encoding::PrettyJson } else { Encoding::Json });
        }
    }
    Err(HttpError::NotAcceptable(if streaming { STREAM_MEDIA_TYPES } else { RESPONSE_MEDIA_TYPES }))
}

/// Kubernetes' `isPrettyPrint`: the `pretty` parameter when it is given (anything but a true
/// value of Go's `ParseBool` is false), else whether the user agent is a command-line HTTP
/// tool or a browser.
fn pretty_asked(req: &HttpRequest) -> bool {
    let query = req.query_string();
    if query.contains("pretty") {
        if let Some(value) = Query::of(query).ok().as_ref().and_then(|q| q.get("pretty")) {
            if !value.is_empty() {
                return kplane_actors::model::text::go_true(value);
            }
        }
    }
    let agent = req.headers().get(header::USER_AGENT).and_then(|a| a.to_str().ok());
    agent.is_some_and(|a| ["curl", "Wget", "Mozilla/5.0"].iter().any(|p| a.starts_with(p)))
}

/// Whether `path` is one of the API's, whose responses are negotiated: resources and their
/// discovery, but not what the proxy subresources pass through from nodes and pods.
fn negotiated(path: &str) -> bool {
    let api = ["/api", "/apis"]
        .iter()
        .any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')));
    api && !path.split('/').any(|segment| segment == "proxy")
}

fn is_watch(req: &ServiceRequest) -> bool {
    let query = req.query_string();
    let watch_param =
        query.contains("watch") && Query::of(query).is_ok_and(|q| q.flag("watch").unwrap_or(false));
    watch_param || req.path().split('/').any(|segment| segment == "watch")
}

/// The middleware: answers 406 for what cannot be given, and re-encodes a JSON response the
/// client asked for indented or as YAML.
pub async fn encode(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, BoxBody>>, actix_web::Error> {
    // Most requests want compact JSON, which needs nothing more (a watch would choose it too:
    // it only cannot have YAML), nor a look at the path.
    let plain = matches!(negotiate(req.request(), false), Ok(Encoding::Json));
    if plain || !negotiated(req.path()) {
        return next.call(req).await.map(ServiceResponse::map_into_left_body);
    }
    let encoding = match negotiate(req.request(), is_watch(&req)) {
        Ok(Encoding::Json) => return next.call(req).await.map(ServiceResponse::map_into_left_body),
        Ok(encoding) => encoding,
        Err(error) => {
            let response = error.error_response();
            return Ok(req.into_response(response).map_into_right_body());
        }
    };
    let response = next.call(req).await?;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    let streamed = matches!(response.response().body().size(), actix_web::body::BodySize::Stream);
    if !is_json || streamed {
        return Ok(response.map_into_left_body());
    }
    let (req, response) = response.into_parts();
    let (head, body) = response.into_parts();
    let bytes = actix_web::body::to_bytes(body)
        .await
        .map_err(|e| actix_web::error::ErrorInternalServerError(e.into().to_string()))?;
    let (content_type, encoded) = match reencode(&bytes, encoding) {
        Some(encoded) => encoded,
        None => (None, bytes.to_vec()), // not JSON after all: sent as it is
    };
    let mut response = head.set_body(BoxBody::new(encoded));
    if let Some(content_type) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    Ok(ServiceResponse::new(req, response).map_into_right_body())
}

/// `json` written as `encoding` (with the content type to give it, if it changes), or `None`
/// when it is not JSON.
fn reencode(json: &[u8], encoding: Encoding) -> Option<(Option<&'static str>, Vec<u8>)> {
    match encoding {
        Encoding::Json => Some((None, json.to_vec())),
        // Indented with two spaces, members in their order, as Go's `json.MarshalIndent`.
        Encoding::PrettyJson => {
            let mut out = Vec::with_capacity(json.len() * 2);
            let mut from = serde_json::Deserializer::from_slice(json);
            let mut to = serde_json::Serializer::pretty(&mut out);
            serde_transcode::transcode(&mut from, &mut to).ok()?;
            from.end().ok()?;
            Some((None, out))
        }
        // Keys sorted, as Kubernetes' YAML (JSON turned into YAML through Go maps) has them.
        Encoding::Yaml => {
            let value: serde_json::Value = serde_json::from_slice(json).ok()?;
            let yaml = serde_yaml::to_string(&value).ok()?;
            Some((Some("application/yaml"), yaml.into_bytes()))
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn negotiated_for(
        accept: &str,
        query: &str,
        agent: &str,
        streaming: bool,
    ) -> Result<Encoding, HttpError> {
        let mut req = TestRequest::get().uri(&format!("/api/v1/pods?{query}"));
        if !accept.is_empty() {
            req = req.insert_header((header::ACCEPT, accept));
        }
        if !agent.is_empty() {
            req = req.insert_header((header::USER_AGENT, agent));
        }
        negotiate(&req.to_http_request(), streaming)
    }

    #[test]
    fn accept_chooses_json_yaml_or_nothing() {
        use Encoding::*;
        let plain = |accept| negotiated_for(accept, "", "kubectl/v1.32.0", false).ok();
        assert_eq!(plain(""), Some(Json));
        assert_eq!(plain("application/json"), Some(Json));
        assert_eq!(
            plain("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Some(Json)
        );
        assert_eq!(plain("application/vnd.kubernetes.protobuf,application/json"), Some(Json));
        assert_eq!(plain("*/*"), Some(Json));
        assert_eq!(plain("application/yaml"), Some(Yaml));
        assert_eq!(plain("text/html, application/yaml;q=0.5, application/json;q=0.9"), Some(Json));
        assert_eq!(plain("application/json;pretty=1"), Some(PrettyJson));
        assert_eq!(plain("application/json;q=0, text/plain"), None);
        let refused = negotiated_for("text/plain", "", "", false).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "only the following media types are accepted: application/json, application/yaml, \
             application/vnd.kubernetes.protobuf"
        );
        assert!(negotiated_for("application/yaml", "", "", true).is_err(), "a watch is not YAML");
        assert_eq!(negotiated_for("application/yaml, */*", "", "", true).ok(), Some(Json));
    }

    #[test]
    fn pretty_follows_the_parameter_then_the_user_agent() {
        use Encoding::*;
        let with = |query, agent| negotiated_for("application/json", query, agent, false).ok();
        assert_eq!(with("", "curl/8.5.0"), Some(PrettyJson));
        assert_eq!(with("", "Wget/1.21"), Some(PrettyJson));
        assert_eq!(with("", "Mozilla/5.0 (X11)"), Some(PrettyJson));
        assert_eq!(with("", "kubectl/v1.32.0"), Some(Json));
        assert_eq!(with("pretty=true", "python"), Some(PrettyJson));
        assert_eq!(with("pretty=false", "curl/8.5.0"), Some(Json));
        assert_eq!(with("pretty=bogus", "curl/8.5.0"), Some(Json), "ParseBool's error is false");
        assert_eq!(with("pretty=", "curl/8.5.0"), Some(PrettyJson), "empty is not given");
    }

    #[test]
    fn only_api_paths_other_than_proxies_are_negotiated() {
        assert!(
            negotiated("/api")
                && negotiated("/api/v1/pods")
                && negotiated("/apis/coordination.k8s.io/v1")
        );
        assert!(!negotiated("/apix") && !negotiated("/version") && !negotiated("/openapi/v3"));
        assert!(!negotiated("/api/v1/nodes/n/proxy/metrics"));
        assert!(!negotiated("/api/v1/namespaces/d/pods/p:80/proxy"));
    }

    #[test]
    fn reencoding_keeps_member_order_or_sorts_keys_for_yaml() {
        let json = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{}},"items":[1,"a"]}"#;
        let (_, pretty) = reencode(json, Encoding::PrettyJson).unwrap();
        assert_eq!(
            String::from_utf8(pretty).unwrap(),
            "{\n  \"kind\": \"Pod\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {\n    \"name\": \"p\",\n    \
             \"labels\": {}\n  },\n  \"items\": [\n    1,\n    \"a\"\n  ]\n}"
        );
        let (content_type, yaml) = reencode(json, Encoding::Yaml).unwrap();
        assert_eq!(content_type, Some("application/yaml"));
        assert_eq!(
            String::from_utf8(yaml).unwrap(),
            "apiVersion: v1\nitems:\n- 1\n- a\nkind: Pod\nmetadata:\n  labels: {}\n  name: p\n"
        );
        assert!(reencode(b"plain text", Encoding::PrettyJson).is_none());
    }
}

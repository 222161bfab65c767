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

/// What a response is turned into before it is written, as an `Accept` entry's `as`, `g` and
/// `v` parameters ask (kube-apiserver's conversions, all in group `meta.k8s.io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// The object or list as it is.
    None,
    /// kubectl's `Table` (`as=Table`) of this version of `meta.k8s.io`.
    Table(&'static str),
    /// `PartialObjectMetadata` of this version of `meta.k8s.io`: a single object's metadata.
    Metadata(&'static str),
    /// `PartialObjectMetadataList`: a list's items' metadata.
    MetadataList(&'static str),
    /// Aggregated discovery (`APIGroupDiscoveryList` of this version of `apidiscovery.k8s.io`),
    /// which only `/api` and `/apis` are turned into.
    Discovery(&'static str),
}

impl Conversion {
    /// The conversion `as`, `g` and `v` ask for, if kube-apiserver serves it in `essence`
    /// (a Table only as JSON or YAML, which a wildcard admits; aggregated discovery only as
    /// JSON, and only of a `discovery` path).
    fn of(
        essence: &str,
        kind: &str,
        group: &str,
        version: &str,
        discovery: bool,
    ) -> Option<Conversion> {
        if group == "apidiscovery.k8s.io" {
            let version = ["v2", "v2beta1"].into_iter().find(|v| *v == version)?;
            let json = essence.eq_ignore_ascii_case("application/json");
            return (discovery && json && kind == "APIGroupDiscoveryList")
                .then_some(Conversion::Discovery(version));
        }
        let version = ["v1", "v1beta1"].into_iter().find(|v| *v == version)?;
        if group != "meta.k8s.io" {
            return None;
        }
        match kind {
            "Table" => ["application/json", "application/yaml", "application/*", "*/*"]
                .iter()
                .any(|t| essence.eq_ignore_ascii_case(t))
                .then_some(Conversion::Table(version)),
            "PartialObjectMetadata" => Some(Conversion::Metadata(version)),
            "PartialObjectMetadataList" => Some(Conversion::MetadataList(version)),
            _ => None,
        }
    }
}

/// One entry of `Accept`: its type, whether it asks for indented output and what it asks the
/// response to be turned into.
struct MediaRange<'a> {
    essence: &'a str,
    quality: f32,
    pretty: bool,
    conversion: Conversion,
}

/// `Accept`'s entries in order of preference, but for those asking for a conversion the
/// server does not make (as kube-apiserver skips them), and whether there were such.
/// `discovery`: the path is one that aggregated discovery is served at.
fn ranges(accept: &str, discovery: bool) -> (Vec<MediaRange<'_>>, bool) {
    let mut unservable = false;
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let essence = parts.next().filter(|e| !e.is_empty())?;
            let (mut quality, mut pretty) = (1.0, false);
            let (mut kind, mut group, mut version) = (None, "", "");
            for param in parts {
                match param.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                    Some(("q", q)) => quality = q.parse().unwrap_or(1.0),
                    Some(("pretty", p)) => pretty = p == "1",
                    Some(("as", a)) => kind = Some(a),
                    Some(("g", g)) => group = g,
                    Some(("v", v)) => version = v,
                    _ => {}
                }
            }
            let conversion = match kind {
                None => Conversion::None,
                Some(kind) => {
                    let conversion = Conversion::of(essence, kind, group, version, discovery);
                    unservable |= conversion.is_none();
                    conversion?
                }
            };
            Some(MediaRange { essence, quality, pretty, conversion })
        })
        .filter(|r| r.quality > 0.0)
        .collect();
    ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality)); // stable: ties keep their order
    (ranges, unservable)
}

/// What `Accept` asks a response to be written in (`streaming`: a watch).
pub fn negotiate(req: &HttpRequest, streaming: bool) -> Result<Encoding, HttpError> {
    let accept = accept(req);
    if matches!(accept, "" | "application/json" | "*/*") && !pretty_asked(req) {
        return Ok(Encoding::Json);
    }
    chosen(accept, req, streaming).map(|(encoding, _)| encoding)
}

/// What `Accept` asks a response to be turned into (`streaming`: a watch); `None` when it
/// admits nothing the server writes (the media middleware answers that).
pub fn conversion(req: &HttpRequest, streaming: bool) -> Conversion {
    let accept = accept(req);
    if !accept.contains("as=") {
        return Conversion::None;
    }
    chosen(accept, req, streaming).map_or(Conversion::None, |(_, conversion)| conversion)
}

fn accept(req: &HttpRequest) -> &str {
    req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or("")
}

/// The first entry of `accept`, in order of preference, that the server can write.
fn chosen(
    accept: &str,
    req: &HttpRequest,
    streaming: bool,
) -> Result<(Encoding, Conversion), HttpError> {
    let (ranges, unservable) = ranges(accept, is_discovery(req.path()));
    // Nothing but refusals (`q=0`) or nothing at all: whatever the server writes, as before;
    // only asking for conversions alone that cannot be made is refused.
    if ranges.is_empty() && !unservable {
        let encoding = if pretty_asked(req) { Encoding::PrettyJson } else { Encoding::Json };
        return Ok((encoding, Conversion::None));
    }
    const JSON_TYPES: &[&str] =
        &["application/json", "application/vnd.kubernetes.protobuf", "application/*", "*/*"];
    for range in ranges {
        let is = |essence: &str| range.essence.eq_ignore_ascii_case(essence);
        if is("application/yaml") && !streaming {
            return Ok((Encoding::Yaml, range.conversion));
        }
        if JSON_TYPES.iter().any(|json| is(json)) {
            let pretty = range.pretty || pretty_asked(req);
            let encoding = if pretty { Encoding::PrettyJson } else { Encoding::Json };
            return Ok((encoding, range.conversion));
        }
    }
    Err(HttpError::NotAcceptable(if streaming { STREAM_MEDIA_TYPES } else { RESPONSE_MEDIA_TYPES }))
}

/// Whether `path` is `/api` or `/apis`, which serve aggregated discovery when asked.
fn is_discovery(path: &str) -> bool {
    matches!(path.trim_end_matches('/'), "/api" | "/apis")
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
    let watch_param = query.contains("watch") && Query::of(query).is_ok_and(|q| q.flag("watch"));
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
            Some((Some("application/yaml"), super::yaml::to_string(&value).into_bytes()))
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
        assert_eq!(plain("application/json;q=0"), Some(Json), "nothing admitted but refusals");
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
    fn conversions_are_those_of_the_first_entry_the_server_can_write() {
        use Conversion::*;
        let converted = |accept: &str| {
            let req =
                TestRequest::get().uri("/api/v1/pods").insert_header((header::ACCEPT, accept));
            conversion(&req.to_http_request(), false)
        };
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(converted(&format!("{table},application/json")), Table("v1"));
        let beta = "application/yaml;as=Table;v=v1beta1;g=meta.k8s.io";
        assert_eq!(converted(beta), Table("v1beta1"));
        assert_eq!(converted("*/*;as=Table;v=v1;g=meta.k8s.io"), Table("v1"));
        let protobuf_table = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(converted(&format!("{protobuf_table},application/json")), None);
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
        assert_eq!(converted(list), MetadataList("v1beta1"));
        let one = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(converted(&format!("{one},application/json")), Metadata("v1"));
        for skipped in ["g=apps;v=v1", "g=meta.k8s.io;v=v2", "g=meta.k8s.io"] {
            let accept = format!("application/json;as=PartialObjectMetadata;{skipped},{table}");
            assert_eq!(converted(&accept), Table("v1"), "{accept}");
        }
        assert_eq!(converted("application/json"), None);
        assert_eq!(converted(&format!("text/html;as=Table,{list};q=0.5")), MetadataList("v1beta1"));
    }

    /// kubectl asks `/api` and `/apis` for aggregated discovery, `v2` first; other paths
    /// have no such form.
    #[test]
    fn aggregated_discovery_is_a_conversion_of_api_and_apis_alone() {
        use Conversion::*;
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let kubectl = format!("{v2},{beta},application/json");
        let converted = |path: &str, accept: &str| {
            let req = TestRequest::get().uri(path).insert_header((header::ACCEPT, accept));
            conversion(&req.to_http_request(), false)
        };
        for path in ["/api", "/apis", "/apis/", "/api?timeout=32s"] {
            assert_eq!(converted(path, &kubectl), Discovery("v2"), "{path}");
        }
        assert_eq!(converted("/apis", &format!("{beta},application/json")), Discovery("v2beta1"));
        assert_eq!(converted("/apis", &format!("{v2};q=0.5,application/json")), None);
        let protobuf = v2.replace("application/json", "application/vnd.kubernetes.protobuf");
        assert_eq!(converted("/apis", &format!("{protobuf},{beta}")), Discovery("v2beta1"));
        assert_eq!(converted("/apis", "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json"), None);
        for path in ["/api/v1", "/apis/policy/v1", "/api/v1/pods"] {
            assert_eq!(converted(path, &kubectl), None, "{path}");
        }
        let only = |path: &str| {
            let req = TestRequest::get().uri(path).insert_header((header::ACCEPT, v2));
            negotiate(&req.to_http_request(), false).is_ok()
        };
        assert!(only("/api") && only("/apis") && !only("/api/v1/pods"));
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

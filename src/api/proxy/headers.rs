//! Which headers a proxied request and its answer carry, as kube-apiserver's proxy (Go's
//! reverse proxy) passes them: all of them but the hop-by-hop ones (those of one connection,
//! RFC 9110 7.6.1, and those the `Connection` header names), and the credentials the API
//! server consumed (`Authorization`, `Impersonate-*`, never sent on to a pod). The backend
//! learns who asked and where from `X-Forwarded-For` and `X-Forwarded-Uri`; the client gets
//! no CORS headers from a backend (they would speak for the API server's origin).

use actix_web::http::header::HeaderMap;

/// The headers of one connection, never passed on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The answer's CORS headers, which Kubernetes' proxy drops.
const CORS: &[&str] = &[
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-allow-origin",
];

/// Whether header `name` (lower case) is one of the connection's: hop-by-hop, or named by the
/// `Connection` header among `connection`.
fn is_hop_by_hop(name: &str, connection: &[String]) -> bool {
    HOP_BY_HOP.contains(&name) || connection.iter().any(|named| named == name)
}

/// The header names a `Connection` header lists (lower case).
fn named_by_connection<'a>(values: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    values
        .filter_map(|value| std::str::from_utf8(value).ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The headers of the request to the backend: the client's, less the connection's, the
/// credentials and `Expect`, with `Host` as the client sent it, and the forwarding headers. `path` is the
/// path the client asked for; `client` the client's address.
pub fn request(
    incoming: &HeaderMap,
    path: &str,
    client: Option<std::net::IpAddr>,
) -> reqwest::header::HeaderMap {
    use reqwest::header::{HeaderName, HeaderValue};
    let connection = named_by_connection(incoming.get_all("connection").map(|v| v.as_bytes()));
    let mut out = reqwest::header::HeaderMap::new();
    let mut forwarded_for = Vec::new();
    for (name, value) in incoming {
        let name = name.as_str();
        // The credentials, and an expectation of `100 Continue` this server met itself.
        let consumed =
            matches!(name, "authorization" | "expect") || name.starts_with("impersonate-");
        if consumed || is_hop_by_hop(name, &connection) {
            continue;
        }
        if name == "x-forwarded-for" {
            forwarded_for.push(String::from_utf8_lossy(value.as_bytes()).into_owned());
            continue;
        }
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value.as_bytes()))
        {
            out.append(name, value);
        }
    }
    if let Some(client) = client {
        forwarded_for.push(client.to_string());
    }
    if let Ok(value) = HeaderValue::from_str(&forwarded_for.join(", ")) {
        if !forwarded_for.is_empty() {
            out.insert("x-forwarded-for", value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(path) {
        out.insert("x-forwarded-uri", value);
    }
    out
}

/// The answer's headers passed back to the client, as (name, value) pairs: the backend's,
/// less the connection's, its CORS headers and its `Content-Length` (the API server's own
/// framing says how long the body is).
pub fn response(backend: &reqwest::header::HeaderMap) -> impl Iterator<Item = (&str, &[u8])> + '_ {
    let connection =
        named_by_connection(backend.get_all("connection").iter().map(|v| v.as_bytes()));
    backend.iter().map(|(name, value)| (name.as_str(), value.as_bytes())).filter(
        move |(name, _)| {
            !is_hop_by_hop(name, &connection) && !CORS.contains(name) && *name != "content-length"
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderName, HeaderValue};

    #[test]
    fn a_request_s_headers_go_on_but_the_connection_s_and_the_credentials() {
        let mut incoming = HeaderMap::new();
        for (name, value) in [
            ("host", "localhost:8001"),
            ("cookie", "a=b"),
            ("x-foo", "bar"),
            ("authorization", "Bearer secret"),
            ("impersonate-user", "admin"),
            ("connection", "keep-alive, X-Hop"),
            ("x-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("x-forwarded-for", "10.0.0.1"),
            ("accept", "text/html"),
        ] {
            incoming.append(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        let client = Some("127.0.0.9".parse().unwrap());
        let out = request(&incoming, "/api/v1/namespaces/ns/pods/p/proxy/x", client);
        let get = |name| out.get(name).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(get("host").as_deref(), Some("localhost:8001"));
        assert_eq!(get("cookie").as_deref(), Some("a=b"));
        assert_eq!(get("x-foo").as_deref(), Some("bar"));
        assert_eq!(get("accept").as_deref(), Some("text/html"));
        assert_eq!(get("x-forwarded-for").as_deref(), Some("10.0.0.1, 127.0.0.9"));
        assert_eq!(get("x-forwarded-uri").as_deref(), Some("/api/v1/namespaces/ns/pods/p/proxy/x"));
        for gone in
            ["authorization", "impersonate-user", "connection", "x-hop", "transfer-encoding"]
        {
            assert_eq!(get(gone), None, "{gone}");
        }
    }

    #[test]
    fn an_answer_s_headers_come_back_but_the_connection_s_cors_and_its_length() {
        let mut backend = reqwest::header::HeaderMap::new();
        for (name, value) in [
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
            ("etag", "\"v1\""),
            ("content-length", "12"),
            ("access-control-allow-origin", "*"),
            ("keep-alive", "timeout=5"),
        ] {
            backend.append(name, value.parse().unwrap());
        }
        let kept: Vec<(String, String)> = response(&backend)
            .map(|(n, v)| (n.to_string(), String::from_utf8(v.to_vec()).unwrap()))
            .collect();
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        assert_eq!(
            kept,
            [pair("set-cookie", "a=1"), pair("set-cookie", "b=2"), pair("etag", "\"v1\"")]
        );
    }
}

//! Prometheus metrics of the API server, served at `/metrics`.

use std::time::Instant;

use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{web, HttpResponse};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The server's metric families.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    /// By `request_kind` (`readOnly`, `mutating`), read from the in-flight limits at a scrape.
    inflight: IntGaugeVec,
}

impl Metrics {
    /// The API server's own metrics and `others` (the store's).
    pub fn new(others: Vec<Box<dyn prometheus::core::Collector>>) -> Self {
        let registry = Registry::new();
        for collector in others {
            registry.register(collector).expect("unique metric");
        }
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, dry run value, group, \
                 version, resource, scope, component, and HTTP response code.",
            ),
            &[&LABELS[..], &["code"]].concat(),
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds for each verb, dry run value, group, \
                 version, resource, subresource, scope and component.",
            )
            // kube-apiserver's buckets (a stable metric's), so that dashboards and SLO rules
            // written for it find theirs.
            .buckets(vec![
                0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0,
                6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
            ]),
            &LABELS,
        )
        .expect("valid metric");
        let inflight = IntGaugeVec::new(
            Opts::new(
                "apiserver_current_inflight_requests",
                "Requests being served per request kind, as the in-flight limits count them \
                 (long-running requests and probes are not).",
            ),
            &["request_kind"],
        )
        .expect("valid metric");
        registry.register(Box::new(requests.clone())).expect("unique metric");
        registry.register(Box::new(latency.clone())).expect("unique metric");
        registry.register(Box::new(inflight.clone())).expect("unique metric");
        // The process's own: CPU seconds, resident memory, open files, start time.
        let process = prometheus::process_collector::ProcessCollector::for_self();
        registry.register(Box::new(process)).expect("unique metric");
        Self { registry, requests, latency, inflight }
    }

    fn render(&self, inflight: &super::InflightLimits) -> Vec<u8> {
        let (read_only, mutating) = inflight.in_flight();
        self.inflight.with_label_values(&["readOnly"]).set(read_only as i64);
        self.inflight.with_label_values(&["mutating"]).set(mutating as i64);
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding cannot fail");
        out
    }
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(render));
}

async fn render(state: web::Data<super::AppState>) -> HttpResponse {
    let text = state.metrics.render(&state.inflight);
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(text)
}

/// The labels kube-apiserver gives a request's metrics (but `code`).
const LABELS: [&str; 8] =
    ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"];

/// A request's labels, as kube-apiserver's metrics name them: `verb` is `GET`, `LIST`, `WATCH`,
/// `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, `DELETECOLLECTION` or `CONNECT` (proxy, exec,
/// attach, port-forward) for a resource request, the method for any other; `scope` is
/// `resource` for a named object or a create, `namespace` for a namespace's collection,
/// `cluster` for the rest. Bounded cardinality: served resources only.
#[derive(Debug, PartialEq, Eq)]
struct Labels {
    verb: &'static str,
    dry_run: &'static str,
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    subresource: &'static str,
    scope: &'static str,
}

impl Labels {
    fn of(method: &str, path: &str, query: &str, content_type: &str) -> Labels {
        let other = Labels {
            verb: match method {
                "GET" => "GET",
                "HEAD" => "HEAD",
                "POST" => "POST",
                "PUT" => "PUT",
                "PATCH" => "PATCH",
                "DELETE" => "DELETE",
                "OPTIONS" => "OPTIONS",
                _ => "other",
            },
            dry_run: "",
            group: "",
            version: "",
            resource: "",
            subresource: "",
            scope: "",
        };
        let parsed = if let Some(rest) = path.strip_prefix("/api/v1/") {
            super::request_info::parse("", "v1", rest)
        } else if let Some(rest) = path.strip_prefix("/apis/") {
            match rest.splitn(3, '/').collect::<Vec<_>>().as_slice() {
                [group, version, rest] => super::request_info::parse(group, version, rest),
                _ => return other,
            }
        } else {
            return other;
        };
        let Ok(target) = parsed else { return other };
        let flag = |name: &str| {
            query.split('&').any(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                key == name && !matches!(value, "false" | "0")
            })
        };
        let subresource = match target.subresource.as_deref() {
            None => "",
            Some(sub) => {
                let served = target.resource.subresources.iter().find(|s| s.name == sub);
                served.map_or("other", |s| s.name)
            }
        };
        let connect = matches!(subresource, "proxy" | "exec" | "attach" | "portforward");
        let named = target.name.is_some();
        let verb = match method {
            _ if connect => "CONNECT",
            "GET" | "HEAD" if target.legacy_watch || flag("watch") => "WATCH",
            "GET" | "HEAD" if named => "GET",
            "GET" | "HEAD" => "LIST",
            "PATCH" if content_type.starts_with("application/apply-patch") => "APPLY",
            "DELETE" if !named => "DELETECOLLECTION",
            _ => other.verb,
        };
        let scope = match (named || method == "POST", target.namespace.is_some()) {
            (true, _) => "resource",
            (false, true) => "namespace",
            (false, false) => "cluster",
        };
        Labels {
            verb,
            dry_run: if flag("dryRun") { "All" } else { "" },
            group: target.resource.group,
            version: target.resource.version,
            resource: target.resource.plural,
            subresource,
            scope,
        }
    }

    fn values(&self) -> [&'static str; 8] {
        let Labels { verb, dry_run, group, version, resource, subresource, scope } = *self;
        [verb, dry_run, group, version, resource, subresource, scope, "apiserver"]
    }
}

/// Counts and times every request.
pub async fn observe(
    req: ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody>,
) -> Result<ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let metrics = req.app_data::<web::Data<super::AppState>>().cloned();
    let content_type = req.headers().get("content-type").and_then(|t| t.to_str().ok());
    let labels = Labels::of(
        req.method().as_str(),
        req.path(),
        req.query_string(),
        content_type.unwrap_or(""),
    );
    let started = Instant::now();
    let response = next.call(req).await;
    if let Some(m) = &metrics {
        let code = response.as_ref().map(|r| r.status().as_u16()).unwrap_or(500).to_string();
        let values = labels.values();
        let with_code = [&values[..], &[code.as_str()]].concat();
        m.metrics.requests.with_label_values(&with_code).inc();
        m.metrics.latency.with_label_values(&values).observe(started.elapsed().as_secs_f64());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::Labels;

    #[test]
    fn labels_name_the_request_as_kube_apiserver_s_metrics_do() {
        fn of(method: &str, path: &str, query: &str, content_type: &str) -> [&'static str; 4] {
            let values = Labels::of(method, path, query, content_type).values();
            [values[0], values[4], values[5], values[6]]
        }
        let pods = "/api/v1/namespaces/ns/pods";
        assert_eq!(of("GET", pods, "limit=500", ""), ["LIST", "pods", "", "namespace"]);
        assert_eq!(of("GET", "/api/v1/pods", "watch=true", ""), ["WATCH", "pods", "", "cluster"]);
        assert_eq!(
            of("GET", "/api/v1/watch/namespaces/ns/pods", "", ""),
            ["WATCH", "pods", "", "namespace"]
        );
        assert_eq!(of("GET", &format!("{pods}/p"), "", ""), ["GET", "pods", "", "resource"]);
        assert_eq!(of("POST", pods, "", ""), ["POST", "pods", "", "resource"]);
        assert_eq!(
            of("PUT", &format!("{pods}/p/status"), "", ""),
            ["PUT", "pods", "status", "resource"]
        );
        let apply = "application/apply-patch+yaml";
        assert_eq!(of("PATCH", &format!("{pods}/p"), "", apply), ["APPLY", "pods", "", "resource"]);
        assert_eq!(of("DELETE", pods, "", ""), ["DELETECOLLECTION", "pods", "", "namespace"]);
        assert_eq!(
            of("GET", &format!("{pods}/p/proxy/x"), "", ""),
            ["CONNECT", "pods", "proxy", "resource"]
        );
        let lease = "/apis/coordination.k8s.io/v1/namespaces/n/leases/l";
        let labels = Labels::of("GET", lease, "", "");
        assert_eq!((labels.group, labels.version), ("coordination.k8s.io", "v1"));
        assert_eq!(Labels::of("POST", pods, "dryRun=All", "").dry_run, "All");
        assert_eq!(of("GET", "/version", "", ""), ["GET", "", "", ""]);
        assert_eq!(of("GET", "/api/v1/nosuch", "", ""), ["GET", "", "", ""]);
    }
}

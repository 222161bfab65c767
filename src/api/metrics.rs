//! Prometheus metrics of the API server, served at `/metrics`.

use std::time::Instant;

use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{web, HttpResponse};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The server's metric families.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    inflight: IntGauge,
}

impl Metrics {
    /// The API server's own metrics and `others` (the store's).
    pub fn new(others: Vec<Box<dyn prometheus::core::Collector>>) -> Self {
        let registry = Registry::new();
        for collector in others {
            registry.register(collector).expect("unique metric");
        }
        let requests = IntCounterVec::new(
            Opts::new("apiserver_request_total", "Requests by verb, resource and HTTP code."),
            &["verb", "resource", "code"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new("apiserver_request_duration_seconds", "Request latency by verb.")
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
                ]),
            &["verb"],
        )
        .expect("valid metric");
        let inflight =
            IntGauge::new("apiserver_current_inflight_requests", "Requests being served.")
                .expect("valid metric");
        registry.register(Box::new(requests.clone())).expect("unique metric");
        registry.register(Box::new(latency.clone())).expect("unique metric");
        registry.register(Box::new(inflight.clone())).expect("unique metric");
        Self { registry, requests, latency, inflight }
    }

    fn render(&self) -> Vec<u8> {
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
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(state.metrics.render())
}

/// The resource a path addresses, for labels (bounded cardinality: served plurals only).
fn resource_label(path: &str) -> &'static str {
    let target = if let Some(rest) = path.strip_prefix("/api/v1/") {
        super::request_info::parse("", "v1", rest)
    } else if let Some(rest) = path.strip_prefix("/apis/") {
        match rest.splitn(3, '/').collect::<Vec<_>>().as_slice() {
            [group, version, rest] => super::request_info::parse(group, version, rest),
            _ => return "",
        }
    } else {
        return "";
    };
    target.map_or("", |t| t.resource.plural)
}

/// Counts and times every request.
pub async fn observe(
    req: ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody>,
) -> Result<ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let metrics = req.app_data::<web::Data<super::AppState>>().cloned();
    let verb = req.method().as_str().to_string();
    let resource = resource_label(req.path());
    let started = Instant::now();
    if let Some(m) = &metrics {
        m.metrics.inflight.inc();
    }
    let response = next.call(req).await;
    if let Some(m) = &metrics {
        m.metrics.inflight.dec();
        let code = response.as_ref().map(|r| r.status().as_u16()).unwrap_or(500).to_string();
        m.metrics.requests.with_label_values(&[verb.as_str(), resource, code.as_str()]).inc();
        m.metrics
            .latency
            .with_label_values(&[verb.as_str()])
            .observe(started.elapsed().as_secs_f64());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::resource_label;

    #[test]
    fn labels_name_the_addressed_resource() {
        assert_eq!(resource_label("/api/v1/namespaces/ns/pods/p"), "pods");
        assert_eq!(resource_label("/api/v1/namespaces/ns"), "namespaces");
        assert_eq!(resource_label("/apis/coordination.k8s.io/v1/namespaces/n/leases"), "leases");
        assert_eq!(resource_label("/version"), "");
    }
}

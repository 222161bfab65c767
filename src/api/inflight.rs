//! The in-flight request limits, kube-apiserver's `--max-requests-inflight` and
//! `--max-mutating-requests-inflight`: a request past its limit is answered 429 TooManyRequests
//! with `Retry-After` at once, so that an overloaded server sheds load (clients, kubectl and
//! client-go among them, retry after the given second) rather than queueing it without bound.
//!
//! Long-running requests (watches, logs, proxying) are not counted, nor are health probes and
//! metrics, which must answer under load; the others count from when their headers arrive
//! until their response starts. A member of `system:masters` on the secure port is answered
//! even past the limit, as kube-apiserver answers "so powerful" a user; the insecure port's
//! requests, which name no user, are counted, so that the limit sheds load there too.

use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{body::EitherBody, web, ResponseError};

use super::params::Query;
use crate::error::HttpError;

/// The two limits and what each has in flight.
#[derive(Debug, Default)]
pub struct InflightLimits {
    read_only: Limit,
    mutating: Limit,
}

impl InflightLimits {
    /// `0` is no limit, as in Kubernetes.
    pub fn new(read_only: usize, mutating: usize) -> Self {
        Self { read_only: Limit::new(read_only), mutating: Limit::new(mutating) }
    }

    /// The read-only and the mutating requests in flight now.
    pub fn in_flight(&self) -> (usize, usize) {
        let now = |limit: &Limit| limit.current.load(Ordering::Acquire);
        (now(&self.read_only), now(&self.mutating))
    }
}

#[derive(Debug, Default)]
struct Limit {
    /// `0`: unlimited.
    max: usize,
    current: AtomicUsize,
}

impl Limit {
    fn new(max: usize) -> Self {
        Self { max, current: AtomicUsize::new(0) }
    }

    /// A place for one more request, given back when the guard drops; `None` when full.
    fn enter(&self) -> Option<Entered<'_>> {
        let admitted = self.current.fetch_add(1, Ordering::AcqRel) < self.max || self.max == 0;
        // Counted from here; a refused request's count is given back as this guard drops.
        let entered = Entered(&self.current);
        admitted.then_some(entered)
    }
}

/// One request counted in its limit until dropped.
struct Entered<'a>(&'a AtomicUsize);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether a request is exempt: long-running (watches, logs, proxying, exec and the like, as
/// Kubernetes counts them), or a health probe or the metrics.
fn exempt(path: &str, query: &str) -> bool {
    // A watch as the handler reads it (`watch=true`, `1`, `True`, ...); most requests carry no
    // such parameter and are not parsed.
    let watch = query.contains("watch") && Query::of(query).is_ok_and(|q| q.flag("watch"));
    let long_running = path.contains("/watch/")
        || watch
        || path.contains("/proxy")
        || ["/log", "/exec", "/attach", "/portforward"].iter().any(|s| path.ends_with(s));
    let probe = ["/healthz", "/livez", "/readyz", "/metrics"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')));
    long_running || probe
}

/// Whether the request's authenticated user (on the secure port: the insecure port's, whom
/// it impersonates, are counted) is a member of `system:masters`.
fn privileged(req: &ServiceRequest) -> bool {
    use actix_web::HttpMessage;
    if !req.app_config().secure() {
        return false;
    }
    let extensions = req.extensions();
    let user = extensions.get::<crate::auth::filter::RequestUser>();
    user.is_some_and(|user| user.0.groups.iter().any(|g| g == crate::auth::authz::PRIVILEGED_GROUP))
}

fn mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Admits a request within its limit, or answers 429.
pub async fn limit(
    req: ServiceRequest,
    next: Next<impl actix_web::body::MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl actix_web::body::MessageBody>>, actix_web::Error> {
    let state = req.app_data::<web::Data<super::AppState>>().cloned();
    let Some(state) = state.filter(|_| !exempt(req.path(), req.query_string())) else {
        return next.call(req).await.map(ServiceResponse::map_into_left_body);
    };
    let limits = &state.inflight;
    let limit = if mutating(req.method()) { &limits.mutating } else { &limits.read_only };
    let entered = limit.enter();
    if entered.is_none() && privileged(&req) {
        return next.call(req).await.map(ServiceResponse::map_into_left_body);
    }
    let Some(_entered) = entered else {
        let response = HttpError::TooManyRequests.error_response();
        return Ok(req.into_response(response).map_into_right_body());
    };
    next.call(req).await.map(ServiceResponse::map_into_left_body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_admits_up_to_its_max_and_frees_places_as_requests_end() {
        let limit = Limit::new(2);
        let first = limit.enter().expect("room");
        let second = limit.enter().expect("room");
        assert!(limit.enter().is_none());
        drop(first);
        let third = limit.enter().expect("a place was freed");
        assert!(limit.enter().is_none());
        drop((second, third));
        assert_eq!(limit.current.load(Ordering::Acquire), 0, "refusals hold no place");
        let unlimited = Limit::new(0);
        let many: Vec<_> = (0..1000).map(|_| unlimited.enter().expect("no limit")).collect();
        assert_eq!(many.len(), 1000);
    }

    #[test]
    fn long_running_requests_and_probes_are_exempt() {
        assert!(exempt("/api/v1/namespaces/default/pods", "watch=true&resourceVersion=5"));
        assert!(exempt("/api/v1/watch/pods", ""));
        assert!(exempt("/api/v1/namespaces/default/pods/p/log", "follow=true"));
        assert!(exempt("/api/v1/nodes/n/proxy/metrics", ""));
        assert!(exempt("/readyz", ""));
        assert!(exempt("/healthz/ping", ""));
        assert!(!exempt("/api/v1/namespaces/default/pods", "limit=500"));
        assert!(!exempt("/api/v1/namespaces/default/pods", "watch=false"));
        assert!(!exempt("/healthzz", ""));
        assert!(!exempt("/version", ""));
        assert!(mutating(&Method::POST) && mutating(&Method::PATCH) && mutating(&Method::DELETE));
        assert!(!mutating(&Method::GET));
    }
}

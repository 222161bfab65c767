//! The HTTP edge: actix-web routes for discovery, OpenAPI, resources, watch, health and metrics.
//! Handlers parse and encode; the API core does the work.

mod body;
pub mod component_status;
mod compression;
mod discovery;
#[cfg(test)]
mod hardening_tests;
mod inflight;
mod issuer_discovery;
mod list_items;
pub use issuer_discovery::KEYS_PATH as ISSUER_KEYS_PATH;
mod logs;
mod media;
mod metrics;
mod objects;
pub mod openapi;
mod panic_recovery;
pub(crate) mod params;
mod partial;
pub mod protobuf;
mod proxy;
mod request_info;
pub mod resource_metrics;
pub mod response_headers;
mod reviews;
mod streams;
mod table;
pub(crate) mod tokens;
mod watch;
mod yaml;

use std::time::Duration;

use actix_web::{web, HttpResponse};
use kplane_actors::core::ApiCore;

use crate::error::HttpError;

pub use discovery::KUBERNETES_MINOR;

pub use inflight::InflightLimits;
pub(crate) use params::Query;
pub(crate) use request_info::parse as parse_resource_path;

/// What every handler shares.
pub struct AppState {
    pub core: ApiCore,
    pub max_body_bytes: usize,
    pub watch_max_timeout: Duration,
    inflight: InflightLimits,
    metrics: metrics::Metrics,
    /// Client for requests the API server makes to node agents and pods (logs, proxy): it
    /// follows no redirect and no proxy from the environment.
    http: reqwest::Client,
    /// How the secure port authenticates and authorizes, and the audit log.
    pub security: Option<std::sync::Arc<crate::auth::Security>>,
    /// Signs and checks service account tokens.
    pub tokens: Option<std::sync::Arc<crate::auth::tokens::TokenIssuer>>,
    /// Answers metrics.k8s.io (none when the metrics server is disabled).
    pub resource_metrics: Option<actix::Addr<kplane_actors::metrics::MetricsScraper>>,
    /// The components `componentstatuses` probes, once the daemon has started them.
    pub components: std::sync::Arc<component_status::ComponentSlot>,
}

impl AppState {
    pub fn new(core: ApiCore, max_body_bytes: usize, watch_max_timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .expect("an HTTP client without TLS builds");
        let metrics = metrics::Metrics::new(core.store_collectors());
        let inflight = InflightLimits::default();
        Self {
            core,
            max_body_bytes,
            watch_max_timeout,
            inflight,
            metrics,
            http,
            security: None,
            tokens: None,
            resource_metrics: None,
            components: Default::default(),
        }
    }

    /// Limits the requests in flight (by default there is no limit).
    pub fn with_inflight_limits(mut self, limits: InflightLimits) -> Self {
        self.inflight = limits;
        self
    }
}

/// Builds the application: state, middleware and every route.
pub fn app(
    state: web::Data<AppState>,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    actix_web::App::new()
        .app_data(state)
        .wrap(actix_web::middleware::from_fn(panic_recovery::answer_500))
        .wrap(actix_web::middleware::from_fn(media::encode))
        .wrap(actix_web::middleware::from_fn(compression::gzip))
        .wrap(actix_web::middleware::from_fn(inflight::limit))
        .wrap(actix_web::middleware::from_fn(crate::auth::filter::guard))
        .wrap(actix_web::middleware::from_fn(metrics::observe))
        .wrap(actix_web::middleware::from_fn(response_headers::set))
        .configure(objects::configure)
        .configure(discovery::configure)
        .configure(issuer_discovery::configure)
        .configure(openapi::configure)
        .configure(metrics::configure)
        .default_service(web::to(not_found))
}

async fn not_found() -> Result<HttpResponse, HttpError> {
    Err(HttpError::NoSuchPath)
}

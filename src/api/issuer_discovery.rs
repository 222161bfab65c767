//! Service account issuer discovery, as kube-apiserver serves it: the OpenID Connect discovery
//! document (`/.well-known/openid-configuration`) and the keys that sign service account
//! tokens (`/openid/v1/jwks`), so that a relying party outside the cluster (Vault, a cloud's
//! workload identity) can check the tokens without asking the API server.

use actix_web::http::header::{CacheControl, CacheDirective};
use actix_web::{web, HttpResponse};

use super::AppState;
use crate::error::HttpError;

pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";
pub const KEYS_PATH: &str = "/openid/v1/jwks";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(DISCOVERY_PATH, web::get().to(discovery));
    cfg.route(KEYS_PATH, web::get().to(keys));
}

/// Kubernetes lets both be cached for an hour.
fn cached(content_type: &str, body: serde_json::Value) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(CacheControl(vec![CacheDirective::Public, CacheDirective::MaxAge(3600)]))
        .body(body.to_string())
}

async fn discovery(state: web::Data<AppState>) -> Result<HttpResponse, HttpError> {
    let issuer = state.tokens.as_ref().ok_or(HttpError::NoSuchPath)?;
    Ok(cached("application/json", issuer.discovery_document()))
}

async fn keys(state: web::Data<AppState>) -> Result<HttpResponse, HttpError> {
    let issuer = state.tokens.as_ref().ok_or(HttpError::NoSuchPath)?;
    Ok(cached("application/jwk-set+json", issuer.key_set()))
}

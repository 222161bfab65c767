//! The headers every response carries, as kube-apiserver's filter chain sets them: `Audit-Id`
//! (the request's own `Audit-ID` when it sent one, a new UUID otherwise; the audit log records
//! the same ID) and `Cache-Control: no-cache, private` unless a handler set its own.

use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CACHE_CONTROL};
use actix_web::middleware::Next;
use actix_web::HttpMessage;

/// The request's audit ID, kept in its extensions for the audit log.
#[derive(Debug, Clone)]
pub struct AuditId(pub HeaderValue);

const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

pub async fn set(
    req: ServiceRequest,
    next: Next<impl actix_web::body::MessageBody>,
) -> Result<ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let given = req.headers().get(AUDIT_ID).filter(|id| !id.is_empty()).cloned();
    let id = given.unwrap_or_else(|| {
        let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
        HeaderValue::from_str(&id.to_string()).expect("a UUID is a header value")
    });
    req.extensions_mut().insert(AuditId(id.clone()));
    let mut response = next.call(req).await?;
    let headers = response.headers_mut();
    if !headers.contains_key(AUDIT_ID) {
        headers.insert(AUDIT_ID, id);
    }
    if !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    }
    Ok(response)
}

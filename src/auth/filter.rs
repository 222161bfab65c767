//! The middleware that guards every request, in kube-apiserver's order: authentication (401
//! when credentials name nobody, or when there are none and anonymous requests are off),
//! authorization (403, in Kubernetes' words: `pods is forbidden: User "bob" cannot create
//! resource "pods" in API group "" in the namespace "default": No policy matched.`), then the
//! handler, then the audit log. Only the secure port authenticates and authorizes; the
//! insecure port's requests are `system:unsecured` (and audited as such). On the secure port
//! a request may impersonate another user ([`super::impersonation`]) when the authenticated
//! user may `impersonate` each part of it; it is then authorized as that user.

use std::sync::Arc;

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, ResponseError};

use super::attributes::Attributes;
use super::audit::{self, AuditLog, Record};
use super::authn::{
    bearer_token, Authenticated, Authenticator, CertificateRejected, CertificateUser,
};
use super::authz::Authorizer;
use super::UserInfo;
use crate::api::AppState;
use crate::error::{ErrorStatus, HttpError};

/// How the secure port authenticates and authorizes, and where requests are audited.
#[derive(Debug)]
pub struct Security {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
    /// Requests without credentials are `system:anonymous` (else 401).
    pub anonymous: bool,
    pub audit: Option<AuditLog>,
}

/// Who a request on the secure port was found to be (in its extensions).
#[derive(Debug, Clone)]
pub struct RequestUser(pub UserInfo);

/// The 403 of a denied request, worded as Kubernetes words it.
/// What a request that failed authentication attempted, as kube-apiserver's audit says it:
/// `Authentication failed, attempted: basic, bearer, x509`.
fn attempted(req: &actix_web::HttpRequest) -> String {
    let authorization = req.headers().get("authorization").and_then(|v| v.to_str().ok());
    let scheme = authorization.and_then(|a| a.split_whitespace().next()).unwrap_or("");
    let mut methods = Vec::new();
    if scheme.eq_ignore_ascii_case("basic") {
        methods.push("basic");
    }
    if scheme.eq_ignore_ascii_case("bearer") {
        methods.push("bearer");
    }
    let certified = req.conn_data::<CertificateUser>().is_some()
        || req.conn_data::<CertificateRejected>().is_some();
    if certified {
        methods.push("x509");
    }
    format!("Authentication failed, attempted: {}", methods.join(", "))
}

fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> HttpError {
    if !a.resource_request {
        let suffix = if reason.is_empty() { String::new() } else { format!(": {reason}") };
        let message =
            format!("forbidden: User {:?} cannot {} path {:?}{suffix}", user.name, a.verb, a.path);
        return HttpError::Forbidden {
            message,
            kind: String::new(),
            group: String::new(),
            name: String::new(),
        };
    }
    let qualified = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    let named = if a.name.is_empty() { String::new() } else { format!(" {:?}", a.name) };
    let message = format!("{qualified}{named} is forbidden: {}", denial(user, a, reason));
    HttpError::Forbidden {
        message,
        kind: a.resource.clone(),
        group: a.api_group.clone(),
        name: a.name.clone(),
    }
}

/// What a resource request's 403 says after `... is forbidden: `.
fn denial(user: &UserInfo, a: &Attributes, reason: &str) -> String {
    let suffix = if reason.is_empty() { String::new() } else { format!(": {reason}") };
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", a.namespace)
    };
    format!(
        "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}{suffix}",
        user.name, a.verb, a.api_group
    )
}

/// For an authorized user (the secure port's, or whom an insecure port's request
/// impersonates), why the user of `req` (a write of one object, e.g. an apply patch) may not
/// create the object it names, in Kubernetes' words after `... is forbidden: `
/// (`User "bob" cannot create resource "configmaps" in API group "" in the namespace "qa"`);
/// `None` when it may, and for the insecure port's own user. Kubernetes authorizes an apply
/// patch, or an update, that creates its object as a create.
pub fn create_denial(req: &actix_web::HttpRequest) -> Option<String> {
    let state = req.app_data::<web::Data<AppState>>()?;
    let security = state.security.as_ref()?;
    let user = req.extensions().get::<RequestUser>()?.0.clone();
    let mut attributes = Attributes::of(req.method(), req.path(), req.query_string());
    attributes.verb = "create".into();
    let decision = security.authorizer.decide(&user, &attributes);
    (!decision.allowed).then(|| denial(&user, &attributes, &decision.reason))
}

/// Who sent a request, and whom it impersonates, as the audit log records them.
type Users<'a> = (&'a UserInfo, Option<&'a UserInfo>);

/// Authenticates, authorizes and audits `req` (see the module's comment).
pub async fn guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, BoxBody>>, actix_web::Error> {
    let secure = req.app_config().secure();
    // The insecure port without an audit log has nothing to do here (not even count a
    // reference), but for a request that impersonates someone.
    let impersonating = || super::impersonation::asked(req.headers());
    let security: Option<Arc<Security>> = req
        .app_data::<web::Data<AppState>>()
        .and_then(|state| state.security.as_ref())
        .filter(|s| secure || s.audit.is_some() || impersonating())
        .cloned();
    let Some(security) = security else {
        if secure {
            // A secure port without its settings lets nobody in.
            let refused = HttpError::Unauthorized.error_response();
            return Ok(req.into_response(refused).map_into_right_body());
        }
        return next.call(req).await.map(ServiceResponse::map_into_left_body);
    };
    let received = audit::micro_time();
    let attributes = Attributes::of(req.method(), req.path(), req.query_string());
    let audit = |req: &actix_web::HttpRequest,
                 users: Users,
                 (code, error): (u16, Option<&ErrorStatus>),
                 streamed: bool,
                 decision,
                 reason: &str| {
        if let Some(log) = &security.audit {
            let (user, impersonated) = users;
            let failed_authentication = (code == 401).then(|| attempted(req));
            let extensions = req.extensions();
            let audit_id = extensions.get::<crate::api::response_headers::AuditId>();
            let audit_id = audit_id.and_then(|id| id.0.to_str().ok()).unwrap_or_default();
            let object = extensions.get::<crate::auth::audit::RequestObject>();
            let annotations = extensions.get::<crate::auth::audit::Annotations>();
            let peer = req.peer_addr().map(|a| a.ip().to_string());
            let event = log.write(&Record {
                user,
                impersonated,
                attributes: &attributes,
                uri: &req.uri().to_string(),
                source_ips: audit::source_ips(req.headers(), peer),
                user_agent: req.headers().get("user-agent").and_then(|v| v.to_str().ok()),
                code,
                streamed,
                decision,
                reason,
                failed_authentication,
                received: &received,
                audit_id,
                error,
                object,
                annotations,
            });
            return Some(event);
        }
        None
    };
    // A use of an auto-generated long-lived token, which every answer warns about.
    let autogenerated_token = std::cell::Cell::new(false);
    // A refusal, audited with the authorization's decision and reason (none for a failed
    // authentication).
    let refuse_as = |req: ServiceRequest, users: Users, error: HttpError, reason: &str| {
        let decision = if matches!(error, HttpError::Unauthorized) { "" } else { "forbid" };
        let mut response = error.error_response();
        if autogenerated_token.get() {
            warn_autogenerated(response.headers_mut());
        }
        {
            let extensions = response.extensions();
            let answer = (response.status().as_u16(), extensions.get::<ErrorStatus>());
            audit(req.request(), users, answer, false, decision, reason);
        }
        Ok(req.into_response(response).map_into_right_body())
    };
    let refuse = |req: ServiceRequest, user: &UserInfo, error: HttpError, reason: &str| {
        refuse_as(req, (user, None), error, reason)
    };
    let mut reason = String::new();
    let (user, impersonated) = if secure {
        let certificate = req.conn_data::<CertificateUser>().cloned();
        let authenticated =
            security.authenticator.authenticate(req.headers(), certificate.as_ref());
        let user = match authenticated {
            Authenticated::User(user) => user,
            // A rejected certificate is a failed authentication, not none.
            Authenticated::Missing if req.conn_data::<CertificateRejected>().is_some() => {
                return refuse(req, &UserInfo::anonymous(), HttpError::Unauthorized, "");
            }
            Authenticated::Missing if security.anonymous => UserInfo::anonymous(),
            // Not the token file's: perhaps a service account's.
            Authenticated::Invalid => {
                let state = req.app_data::<web::Data<AppState>>().cloned();
                let token = bearer_token(req.headers()).map(String::from);
                let account = match (state, token) {
                    (Some(state), Some(token)) => {
                        crate::api::tokens::service_account(&state, &token, &[]).await
                    }
                    _ => None,
                };
                match account {
                    Some(account) => {
                        // As kube-apiserver's legacy token validator: the Secret is named in
                        // the audit event, by whether its account lists it (auto-generated).
                        if let Some(secret) = &account.secret {
                            let key = match account.autogenerated {
                                true => "authentication.k8s.io/legacy-token-autogenerated-secret",
                                false => "authentication.k8s.io/legacy-token-manual-secret",
                            };
                            super::audit::annotate(req.request(), key, secret.clone());
                            autogenerated_token.set(account.autogenerated);
                        }
                        account.user()
                    }
                    None => {
                        return refuse(req, &UserInfo::anonymous(), HttpError::Unauthorized, "")
                    }
                }
            }
            Authenticated::Missing => {
                return refuse(req, &UserInfo::anonymous(), HttpError::Unauthorized, "");
            }
        };
        let impersonated = match super::impersonation::requested(req.headers()) {
            Ok(None) => None,
            Ok(Some(impersonation)) => {
                let authorizer = &security.authorizer;
                let decided = impersonation.checks.iter().map(|c| (c, authorizer.decide(&user, c)));
                let denied = decided.into_iter().find(|(_, decision)| !decision.allowed);
                if let Some((check, decision)) = denied {
                    let error = forbidden(&user, check, &decision.reason);
                    return refuse(req, &user, error, &decision.reason);
                }
                Some(impersonation.user)
            }
            Err(error) => return refuse(req, &user, error, ""),
        };
        let acting = impersonated.as_ref().unwrap_or(&user);
        let decision = security.authorizer.decide(acting, &attributes);
        if !decision.allowed {
            let error = forbidden(acting, &attributes, &decision.reason);
            return refuse_as(req, (&user, impersonated.as_ref()), error, &decision.reason);
        }
        reason = decision.reason;
        req.extensions_mut().insert(RequestUser(acting.clone()));
        (user, impersonated)
    } else {
        // The insecure port's user is a superuser, who may impersonate anyone: a request that
        // impersonates someone (`kubectl --as`) is that user there too, authorized as such.
        let user = UserInfo::unsecured();
        match super::impersonation::requested(req.headers()) {
            Ok(None) => (user, None),
            Ok(Some(impersonation)) => {
                let acting = impersonation.user;
                let decision = security.authorizer.decide(&acting, &attributes);
                if !decision.allowed {
                    let error = forbidden(&acting, &attributes, &decision.reason);
                    return refuse_as(req, (&user, Some(&acting)), error, &decision.reason);
                }
                reason = decision.reason;
                req.extensions_mut().insert(RequestUser(acting.clone()));
                (user, Some(acting))
            }
            Err(error) => return refuse(req, &user, error, ""),
        }
    };
    let mut response = next.call(req).await?;
    if autogenerated_token.get() {
        warn_autogenerated(response.headers_mut());
    }
    let streamed = matches!(response.response().body().size(), actix_web::body::BodySize::Stream);
    let decision = if secure || impersonated.is_some() { "allow" } else { "" };
    let users = (&user, impersonated.as_ref());
    let started = {
        let extensions = response.response().extensions();
        let answer = (response.status().as_u16(), extensions.get::<ErrorStatus>());
        audit(response.request(), users, answer, streamed, decision, &reason)
    };
    // A streamed answer is logged again, complete, once it ends (or its client goes).
    match started.filter(|_| streamed) {
        Some(event) => Ok(response.map_body(|_, body| {
            let on_end = move || {
                if let Some(log) = &security.audit {
                    log.complete(event);
                }
            };
            EitherBody::right(BoxBody::new(audit::Completing::new(body, on_end)))
        })),
        None => Ok(response.map_into_left_body()),
    }
}

/// Kubernetes' warning to a use of an auto-generated long-lived token.
fn warn_autogenerated(headers: &mut actix_web::http::header::HeaderMap) {
    let warning = "299 - \"Use tokens from the TokenRequest API or manually created \
                   secret-based tokens instead of auto-generated secret-based tokens.\"";
    let warning = actix_web::http::header::HeaderValue::from_static(warning);
    headers.append(actix_web::http::header::WARNING, warning);
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::Method;

    #[test]
    fn denials_are_worded_as_kubernetes_words_them() {
        let bob = UserInfo::authenticated("bob", "", vec![]);
        let create = Attributes::of(&Method::POST, "/api/v1/namespaces/default/pods", "");
        assert_eq!(
            forbidden(&bob, &create, "No policy matched.").to_string(),
            "pods is forbidden: User \"bob\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\": No policy matched."
        );
        let lease =
            Attributes::of(&Method::GET, "/apis/coordination.k8s.io/v1/namespaces/x/leases/n1", "");
        assert!(forbidden(&bob, &lease, "").to_string().starts_with(
            "leases.coordination.k8s.io \"n1\" is forbidden: User \"bob\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"x\""
        ));
        let nodes = Attributes::of(&Method::GET, "/api/v1/nodes", "");
        assert!(forbidden(&bob, &nodes, "").to_string().ends_with("at the cluster scope"));
        let health = Attributes::of(&Method::GET, "/healthz", "");
        assert_eq!(
            forbidden(&bob, &health, "").to_string(),
            "forbidden: User \"bob\" cannot get path \"/healthz\""
        );
    }
}

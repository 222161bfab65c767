//! Service account tokens over the API: `serviceaccounts/{name}/token` (a TokenRequest,
//! `kubectl create token NAME [--audience A] [--duration D]`) issues one, and
//! `authentication.k8s.io/v1` TokenReviews check any bearer token as the secure port checks it
//! (the token file's, then a service account's), answering who it is.

use actix_web::{web, HttpRequest, HttpResponse};
use kplane_actors::client::{object_name, object_namespace, object_uid};
use kplane_actors::model::is_being_deleted;
use kplane_actors::model::{resources, ResourceType};
use serde_json::{json, Value};

use super::objects::{add_warnings, checked_body_of, json_bytes};
use super::AppState;
use super::Query;
use crate::auth::tokens::{TokenAccount, ISSUER};
use crate::error::HttpError;
use kplane_actors::core::token_request::BoundObject;

fn strings(value: Option<&Value>, key: &str) -> Vec<String> {
    value.map_or_else(Vec::new, |value| kplane_actors::model::json::strings(value, key))
}

/// POST `serviceaccounts/{name}/token`.
pub async fn request(
    req: &HttpRequest,
    payload: web::Payload,
    query: &Query,
    state: &AppState,
    namespace: &str,
    name: &str,
) -> Result<HttpResponse, HttpError> {
    let kind = ("authentication.k8s.io", "v1", "TokenRequest");
    let post = actix_web::http::Method::POST;
    let (body, warnings) = checked_body_of(req, post, payload, query, state, kind).await?;
    let answer = state.core.request_token(namespace, name, body).await?;
    let mut response = json_bytes(actix_web::http::StatusCode::CREATED, answer.to_string().into());
    add_warnings(&mut response, &warnings);
    Ok(response)
}

/// The service account a bearer token names, if it is good and the account, and what the
/// token is bound to, are still there (see [`still_there`]); a long-lived token only while its
/// Secret still holds it, is not being deleted and has not been invalidated.
pub async fn service_account(
    state: &AppState,
    token: &str,
    audiences: &[String],
) -> Option<TokenAccount> {
    let account = state.tokens.as_ref()?.verify(token, audiences)?;
    let own = BoundObject { name: account.name.clone(), uid: account.uid.clone() };
    // The node a pod-bound token names is only told.
    let node = if account.pod.is_some() { &None } else { &account.node };
    let namespace = account.namespace.as_str();
    // A long-lived token goes with its account's deletion at once (Kubernetes' legacy token
    // validator), a requested one a grace period later.
    let account_grace =
        if account.secret.is_some() { chrono::Duration::zero() } else { BOUND_GRACE };
    let needed = [
        ("serviceaccounts", namespace, &Some(own), account_grace),
        ("pods", namespace, &account.pod, BOUND_GRACE),
        ("secrets", namespace, &account.bound_secret, BOUND_GRACE),
        ("nodes", "", node, BOUND_GRACE),
    ];
    for (plural, namespace, object, grace) in needed {
        let Some(object) = object else { continue };
        if !still_there(state, plural, namespace, object, grace).await {
            return None;
        }
    }
    if let Some(secret) = &account.secret {
        let secret = state.core.get(resources::core("secrets"), &account.namespace, secret).await;
        let secret = secret.ok()?.to_value();
        if !holds_token(&secret, token) {
            return None;
        }
        // As kube-apiserver: the use is noted, then an invalidated token refused.
        let invalidated = is_invalidated(&secret);
        note_last_use(state, secret).await;
        if invalidated {
            return None;
        }
    }
    Some(account)
}

/// Whether `object` (of `plural` in `namespace`) is there with the uid a token names, and
/// not deleted more than `grace` ago.
async fn still_there(
    state: &AppState,
    plural: &str,
    namespace: &str,
    object: &BoundObject,
    grace: chrono::Duration,
) -> bool {
    let found = state.core.get(resources::core(plural), namespace, &object.name).await;
    found.is_ok_and(|found| {
        let found = found.to_value();
        object_uid(&found) == object.uid && !deleted_before(&found, grace)
    })
}

/// Whether `object` has been being deleted for longer than `grace` (any time, for none).
fn deleted_before(object: &Value, grace: chrono::Duration) -> bool {
    let deleted_at = kplane_actors::model::json::at(object, "/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok());
    deleted_at.is_some_and(|at| grace.is_zero() || at < chrono::Utc::now() - grace)
}

/// How long after its deletion time an object's tokens still hold (a pod's containers may
/// still be stopping), as Kubernetes allows.
const BOUND_GRACE: chrono::Duration = chrono::Duration::seconds(60);

/// The label Kubernetes invalidates a Secret's long-lived token with (any value).
const INVALID_SINCE: &str = "kubernetes.io/legacy-token-invalid-since";
/// The label saying on which day (UTC) a Secret's long-lived token was last used.
const LAST_USED: &str = "kubernetes.io/legacy-token-last-used";

/// Whether a service account token Secret that is not being deleted holds `token` (compared
/// in constant time).
fn holds_token(secret: &Value, token: &str) -> bool {
    use base64::Engine;
    use subtle::ConstantTimeEq;
    let held = secret.pointer("/data/token").and_then(Value::as_str).unwrap_or("");
    let held = base64::engine::general_purpose::STANDARD.decode(held).unwrap_or_default();
    let holds: bool = held.ct_eq(token.as_bytes()).into();
    !is_being_deleted(secret) && holds
}

/// Whether a token Secret's token has been invalidated (a non-empty `INVALID_SINCE`).
fn is_invalidated(secret: &Value) -> bool {
    let labels = secret.pointer("/metadata/labels");
    let since = labels.and_then(|l| l.get(INVALID_SINCE)).and_then(Value::as_str);
    since.is_some_and(|since| !since.is_empty())
}

/// Labels the Secret of a long-lived token just used with today's date, unless it has it, as
/// kube-apiserver tracks their use (a failed write is let go: the next use tries again).
async fn note_last_use(state: &AppState, mut secret: Value) {
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let labels = secret.pointer("/metadata/labels");
    if labels.and_then(|l| l.get(LAST_USED)).and_then(Value::as_str) == Some(today.as_str()) {
        return;
    }
    let Some(meta) = secret.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[LAST_USED] = json!(today);
    let (namespace, name) = (object_namespace(&secret), object_name(&secret));
    let (namespace, name) = (namespace.to_string(), name.to_string());
    let options = kplane_actors::core::WriteOptions {
        field_manager: Some("kube-apiserver".into()),
        ..Default::default()
    };
    let secrets = resources::core("secrets");
    if let Err(error) = state.core.update(secrets, &namespace, &name, secret, &options).await {
        tracing::debug!(%namespace, %name, %error, "noting a long-lived token's use");
    }
}

/// Answers a TokenReview: who its `spec.token` is, for its `spec.audiences`.
pub async fn review(
    state: &AppState,
    resource: &'static ResourceType,
    review: Value,
) -> Result<Value, HttpError> {
    let mut review = kplane_actors::core::addressed_object(resource, "", review)?;
    let spec = review.get("spec");
    let token = spec.and_then(|s| s.get("token")).and_then(Value::as_str).unwrap_or("").to_string();
    if token.is_empty() {
        return Err(HttpError::BadRequest(
            "token is required for TokenReview in authentication.k8s.io".into(),
        ));
    }
    let audiences = strings(spec, "audiences");
    // A static token is good for the API server's audience only (Kubernetes wraps its token
    // file as audience-agnostic): a review asking for other audiences alone does not
    // authenticate it.
    let for_api_server = audiences.is_empty() || audiences.iter().any(|a| a == ISSUER);
    let static_user = state.security.as_ref().and_then(|s| s.authenticator.token_user(&token));
    let status = match static_user.filter(|_| for_api_server) {
        Some(user) => json!({"authenticated": true, "user": user.to_json(),
            "audiences": [ISSUER]}),
        None => match service_account(state, &token, &audiences).await {
            // The audiences asked for that the token is for (the issuer's when none are asked).
            Some(account) => {
                let asked = if audiences.is_empty() { vec![ISSUER.to_string()] } else { audiences };
                let both: Vec<&String> =
                    asked.iter().filter(|a| account.audiences.contains(a)).collect();
                json!({"authenticated": true, "user": account.user().to_json(), "audiences": both})
            }
            None => json!({"user": {}, "error": "invalid bearer token"}),
        },
    };
    if let Some(object) = review.as_object_mut() {
        let meta = object.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("creationTimestamp").or_insert(Value::Null);
        }
        object.insert("status".into(), status);
    }
    Ok(review)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_holds_its_token_until_deleted_or_invalidated_with_a_date() {
        let secret = |labels: Value, deleting: bool| {
            let mut secret = json!({"metadata": {"name": "t", "labels": labels},
                "data": {"token": "dG9r"}});
            if deleting {
                secret["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
            }
            secret
        };
        assert!(holds_token(&secret(json!({}), false), "tok"));
        assert!(!holds_token(&secret(json!({}), false), "tok2"));
        assert!(!holds_token(&secret(json!({}), true), "tok"));
        assert!(!is_invalidated(&secret(json!({}), false)));
        let invalid = secret(json!({INVALID_SINCE: "2026-12-01"}), false);
        assert!(holds_token(&invalid, "tok") && is_invalidated(&invalid));
        // An empty label invalidates nothing, as Kubernetes reads it.
        assert!(!is_invalidated(&secret(json!({INVALID_SINCE: ""}), false)));
    }
}

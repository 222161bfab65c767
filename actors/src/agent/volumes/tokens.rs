//! The token of a projected `serviceAccountToken` source, as the kubelet's token manager keeps
//! it: asked of the API server (a TokenRequest for the pod's account, bound to the pod) and
//! asked again once 80% of its lifetime has passed or it is a day old. Until then the token
//! the volume holds is kept, so a volume brought up to date (or an agent restarted) asks for
//! nothing; a token that cannot be renewed is kept while it is good.

use std::path::Path;

use k8s_openapi::api::core::v1::ServiceAccountTokenProjection;
use serde_json::{json, Value};

use super::PodContext;
use crate::client::ApiClient;

/// A token's lifetime when its source asks for none (Kubernetes' default).
const DEFAULT_SECONDS: i64 = 3600;
/// A token older than this is renewed whatever its lifetime.
const MOST_AGE_SECONDS: i64 = 24 * 60 * 60;

/// The token for `source` of `ctx`'s pod: the one at `held` (the volume's file) while it needs
/// no renewal, a new one otherwise. `Err` is the kubelet's reason, for the `FailedMount` event.
pub(super) async fn token(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    source: &ServiceAccountTokenProjection,
    held: &Path,
) -> Result<String, String> {
    let now = chrono::Utc::now().timestamp();
    let held = std::fs::read_to_string(held).ok().filter(|token| !token.is_empty());
    let lifetime = held.as_deref().and_then(lifetime);
    if let (Some(held), Some(lifetime)) = (&held, lifetime) {
        if !lifetime.needs_renewal(now) {
            return Ok(held.clone());
        }
    }
    let metadata = &ctx.pod.metadata;
    let namespace = metadata.namespace.as_deref().unwrap_or("default");
    let spec = ctx.pod.spec.as_ref();
    let account = spec.and_then(|s| s.service_account_name.as_deref()).unwrap_or("default");
    let mut request_spec = json!({
        "expirationSeconds": source.expiration_seconds.unwrap_or(DEFAULT_SECONDS),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
            "name": metadata.name.as_deref().unwrap_or(""),
            "uid": metadata.uid.as_deref().unwrap_or("")},
    });
    if let Some(audience) = source.audience.as_deref().filter(|a| !a.is_empty()) {
        request_spec["audiences"] = json!([audience]);
    }
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": request_spec});
    let answer = client.request_token(namespace, account, request).await;
    match answer.map(|a| a.pointer("/status/token").and_then(Value::as_str).map(String::from)) {
        Ok(Some(token)) => Ok(token),
        Ok(None) => Err("failed to fetch token: the TokenRequest's answer holds none".into()),
        Err(error) => match (held, lifetime) {
            (Some(held), Some(lifetime)) if now < lifetime.expires => {
                tracing::warn!(pod = ?metadata.name, %error, "renewing a service account token");
                Ok(held)
            }
            (Some(_), Some(_)) => Err(format!("token expired and refresh failed: {error}")),
            _ => Err(format!("failed to fetch token: {error}")),
        },
    }
}

/// When a token was issued and when the lifetime it asked for ends (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lifetime {
    issued: i64,
    expires: i64,
}

impl Lifetime {
    /// Whether the token is to be renewed at `now`: past 80% of its lifetime, a day old, or
    /// issued in what is now the future (the clock went back), as the kubelet decides.
    fn needs_renewal(&self, now: i64) -> bool {
        let lifetime = self.expires - self.issued;
        now < self.issued
            || now >= self.issued + MOST_AGE_SECONDS
            || now >= self.expires - lifetime / 5
    }
}

/// The lifetime a token's claims say (read without checking its signature: it is the
/// API server's answer, kept in the pod's own volume). An extended token's lifetime is the one
/// it asked for (its `warnafter`), as the kubelet counts it.
fn lifetime(token: &str) -> Option<Lifetime> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: Value = serde_json::from_slice(&payload).ok()?;
    let issued = claims.get("iat")?.as_i64()?;
    let warn_after = claims.pointer("/kubernetes.io/warnafter").and_then(Value::as_i64);
    let expires = warn_after.or_else(|| claims.get("exp")?.as_i64())?;
    Some(Lifetime { issued, expires })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn token_of(claims: Value) -> String {
        let encode = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        format!("{}.{}.sig", encode(&json!({"alg": "ES256"})), encode(&claims))
    }

    #[test]
    fn a_token_is_renewed_past_four_fifths_of_its_asked_lifetime_or_a_day() {
        let extended = token_of(json!({"iat": 1000, "exp": 1000 + 31_536_000,
            "kubernetes.io": {"warnafter": 1000 + 3607}}));
        let lifetime = super::lifetime(&extended).unwrap();
        assert_eq!(lifetime, Lifetime { issued: 1000, expires: 4607 });
        // 20% of 3607 s is 721 s: renewed from 3886 on.
        assert!(!lifetime.needs_renewal(1000));
        assert!(!lifetime.needs_renewal(3885));
        assert!(lifetime.needs_renewal(3886));
        assert!(lifetime.needs_renewal(999), "the clock went back");
        let long = super::lifetime(&token_of(json!({"iat": 0, "exp": 10 * 86_400}))).unwrap();
        assert!(!long.needs_renewal(86_399));
        assert!(long.needs_renewal(86_400), "a day old");
        assert_eq!(super::lifetime("not a token"), None);
        assert_eq!(super::lifetime(&token_of(json!({"exp": 5}))), None, "no iat");
    }
}

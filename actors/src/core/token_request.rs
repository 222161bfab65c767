//! TokenRequest (POST `serviceaccounts/{name}/token`), as Kubernetes' token REST storage: the
//! request is checked, defaulted and, when it names one in `spec.boundObjectRef`, tied to a
//! pod, a Secret or a node that must exist (with the uid the reference gives); the token itself
//! is signed by a [`GrantSigner`], which the HTTP edge supplies with its key. Nothing is stored.
//!
//! A token asking for exactly [`EXTENDABLE_SECONDS`] for the API server's audiences and bound
//! to a pod (the token of a pod's `kube-api-access-*` volume) is good for a year and only
//! warns after its hour, as kube-apiserver's `--service-account-extend-token-expiration`
//! (default true) does: clients that do not reread their token file keep working.

use serde_json::{json, Value};

use super::{ApiCore, ApiError};
use crate::client::object_uid;
use crate::model::{json, resources, FieldError, ResourceType};

/// Token lifetimes: an hour unless asked, from ten minutes to 2^32 seconds (Kubernetes' bounds).
const DEFAULT_SECONDS: i64 = 3600;
const LEAST_SECONDS: i64 = 600;
const MOST_SECONDS: i64 = 1 << 32;
/// The lifetime a pod's API token volume asks for, which is extended.
pub const EXTENDABLE_SECONDS: i64 = super::service_account::API_ACCESS_TOKEN_SECONDS;
/// What an extended token is good for: a year.
const EXTENDED_SECONDS: i64 = 365 * 24 * 60 * 60;

/// An object a token is bound to: it is good only while the object is there with this uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundObject {
    pub name: String,
    pub uid: String,
}

/// What a token says: who it is for, for how long, and what it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    pub namespace: String,
    pub account: BoundObject,
    pub audiences: Vec<String>,
    /// When it was issued, and when it expires (Unix seconds).
    pub issued_at: i64,
    pub expires_at: i64,
    /// When, before it expires, using it is warned about (an extended token's asked end).
    pub warn_after: Option<i64>,
    pub pod: Option<BoundObject>,
    pub secret: Option<BoundObject>,
    /// The node a bound pod runs on, or the node the token is bound to.
    pub node: Option<BoundObject>,
}

/// Signs tokens with the service account key.
pub trait GrantSigner: Send + Sync {
    /// The audiences a token is for when its request names none: the API server's.
    fn api_audiences(&self) -> Vec<String>;
    /// The signed token of `grant`.
    fn sign_grant(&self, grant: &TokenGrant) -> Result<String, String>;
}

/// What a TokenRequest is refused with: 422 on `field`, as Kubernetes words it.
fn invalid(name: &str, field: &str, value: Value, detail: &str) -> ApiError {
    let cause = match &value {
        Value::Number(n) => FieldError::invalid_number(field, n.as_i64().unwrap_or(0), detail),
        _ => FieldError::invalid(field, value.as_str().unwrap_or(""), detail),
    };
    ApiError::Invalid {
        kind: "TokenRequest",
        group: "authentication.k8s.io",
        name: name.to_string(),
        causes: vec![cause],
    }
}

impl ApiCore {
    /// Tokens are signed by `signer` (without one, TokenRequests are 503).
    pub fn with_token_signer(mut self, signer: std::sync::Arc<dyn GrantSigner>) -> Self {
        self.token_signer = Some(signer);
        self
    }

    /// Pods get the API token volume of their service account (see `service_account`).
    pub fn with_api_access_volumes(mut self) -> Self {
        self.mount_api_access = true;
        self
    }

    /// Issues the token `request` (a TokenRequest) asks of account `name` in `namespace`:
    /// the request answered, its status holding the token and when it expires.
    pub async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        request: Value,
    ) -> Result<Value, ApiError> {
        let accounts = resources::core("serviceaccounts");
        self.check_namespace_accepts(accounts, namespace, name)?;
        // A namespace in the body must be the request's (the API server's create handler
        // checks it first), a name the account's.
        let sent = |field: &str| {
            let sent = json::at(&request, &format!("/metadata/{field}")).and_then(Value::as_str);
            sent.filter(|sent| !sent.is_empty()).map(str::to_string)
        };
        if sent("namespace").is_some_and(|sent| sent != namespace) {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the \
                 request"
                    .into(),
            ));
        }
        if let Some(sent) = sent("name").filter(|sent| sent != name) {
            let detail = "must match the service account name if specified";
            return Err(invalid(name, "metadata.name", json!(sent), detail));
        }
        let spec = request.get("spec").cloned().unwrap_or(Value::Null);
        let seconds = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_SECONDS,
            Some(seconds) => seconds.as_i64().unwrap_or(-1),
        };
        let account = self.get(accounts, namespace, name).await?.to_value();
        let signer = self
            .token_signer
            .as_ref()
            .ok_or_else(|| ApiError::Unavailable("no service account signing key".into()))?;
        let mut audiences = json::strings(&spec, "audiences");
        if audiences.is_empty() {
            audiences = signer.api_audiences();
        }
        if seconds < LEAST_SECONDS {
            let detail = "may not specify a duration less than 10 minutes";
            return Err(invalid("", "spec.expirationSeconds", json!(seconds), detail));
        }
        if seconds > MOST_SECONDS {
            let detail = "may not specify a duration larger than 2^32 seconds";
            return Err(invalid("", "spec.expirationSeconds", json!(seconds), detail));
        }
        let now = chrono::Utc::now().timestamp();
        let mut grant = TokenGrant {
            namespace: namespace.to_string(),
            account: BoundObject { name: name.to_string(), uid: object_uid(&account).to_string() },
            audiences: audiences.clone(),
            issued_at: now,
            expires_at: now + seconds,
            warn_after: None,
            pod: None,
            secret: None,
            node: None,
        };
        if let Some(reference) = spec.get("boundObjectRef").filter(|r| r.is_object()) {
            self.bind_token(namespace, name, reference, &mut grant).await?;
        }
        let api_audiences = signer.api_audiences();
        let for_api_server = audiences.iter().all(|a| api_audiences.contains(a));
        if grant.pod.is_some() && seconds == EXTENDABLE_SECONDS && for_api_server {
            grant.warn_after = Some(grant.expires_at);
            grant.expires_at = now + EXTENDED_SECONDS;
        }
        let token = signer.sign_grant(&grant).map_err(ApiError::Internal)?;
        let expires = chrono::DateTime::from_timestamp(now + seconds, 0)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        // The request's own metadata, without what only the server sets, named after the
        // account in its namespace and created now, as Kubernetes answers it (nothing is
        // stored).
        let metadata = request.get("metadata").and_then(Value::as_object).cloned();
        let mut metadata = metadata.unwrap_or_default();
        for system in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            metadata.remove(system);
        }
        metadata.insert("name".into(), json!(name));
        metadata.insert("namespace".into(), json!(namespace));
        let created = chrono::DateTime::from_timestamp(now, 0).unwrap_or_default();
        let created = created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        metadata.insert("creationTimestamp".into(), json!(created));
        // (Go writes a bound object reference even when there is none.)
        let bound = spec.get("boundObjectRef").filter(|r| r.is_object()).cloned();
        let answered_spec = json!({"audiences": audiences, "expirationSeconds": seconds,
            "boundObjectRef": bound.unwrap_or(Value::Null)});
        let answer = json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": metadata,
            "spec": answered_spec,
            "status": {"token": token, "expirationTimestamp": expires},
        });
        Ok(answer)
    }

    /// Ties `grant` to the object `reference` names (a pod of the account, a Secret or a
    /// node), as Kubernetes' token storage does.
    async fn bind_token(
        &self,
        namespace: &str,
        account: &str,
        reference: &Value,
        grant: &mut TokenGrant,
    ) -> Result<(), ApiError> {
        let text = |field: &str| reference.get(field).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind, name) = (text("apiVersion"), text("kind"), text("name"));
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let (resource, scope): (&'static ResourceType, &str) = match (group, kind) {
            ("", "Pod") => (resources::core("pods"), namespace),
            ("", "Secret") => (resources::core("secrets"), namespace),
            ("", "Node") => (resources::core("nodes"), ""),
            _ => {
                let gvk = match group {
                    "" => format!("/{}, Kind={kind}", api_version),
                    _ => format!("{api_version}, Kind={kind}"),
                };
                return Err(ApiError::BadRequest(format!(
                    "cannot bind token to object of type {gvk}"
                )));
            }
        };
        if name.is_empty() {
            return Err(ApiError::BadRequest("Name parameter required.".into()));
        }
        let object = self.get(resource, scope, name).await?.to_value();
        let uid = object_uid(&object).to_string();
        let bound = BoundObject { name: name.to_string(), uid: uid.clone() };
        match resource.kind {
            "Pod" => {
                let runs_as = json::at(&object, "/spec/serviceAccountName").and_then(Value::as_str);
                if runs_as.unwrap_or("") != account {
                    return Err(ApiError::BadRequest(format!(
                        "cannot bind token for serviceaccount {account:?} to pod running with \
                         different serviceaccount name."
                    )));
                }
                let node = json::at(&object, "/spec/nodeName").and_then(Value::as_str);
                if let Some(node) = node.filter(|node| !node.is_empty()) {
                    // The node it runs on, by name, and by uid when it is there.
                    let found = self.get(resources::core("nodes"), "", node).await;
                    let uid = found.map(|found| object_uid(&found.to_value()).to_string());
                    let uid = uid.unwrap_or_default();
                    grant.node = Some(BoundObject { name: node.to_string(), uid });
                }
                grant.pod = Some(bound);
            }
            "Secret" => grant.secret = Some(bound),
            _ => grant.node = Some(bound),
        }
        let asked = text("uid");
        if !asked.is_empty() && asked != uid {
            let kind = resource.kind;
            return Err(ApiError::Conflict {
                resource: kind,
                group: "",
                name: name.to_string(),
                message: format!(
                    "Operation cannot be fulfilled on {kind} {name:?}: the UID in the bound object \
                     reference ({asked}) does not match the UID in record. The object might have \
                     been deleted and then recreated"
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::core::WriteOptions;

    /// Signs a grant as its JSON, for the test to read back.
    struct Plain;

    impl GrantSigner for Plain {
        fn api_audiences(&self) -> Vec<String> {
            vec!["https://api".into()]
        }
        fn sign_grant(&self, grant: &TokenGrant) -> Result<String, String> {
            let bound = |o: &Option<BoundObject>| o.as_ref().map(|o| json!([o.name, o.uid]));
            Ok(json!({"aud": grant.audiences, "life": grant.expires_at - grant.issued_at,
                "warn": grant.warn_after.map(|w| w - grant.issued_at),
                "sa": [grant.account.name, grant.account.uid], "pod": bound(&grant.pod),
                "secret": bound(&grant.secret), "node": bound(&grant.node)})
            .to_string())
        }
    }

    async fn create(core: &ApiCore, plural: &str, namespace: &str, object: Value) -> Value {
        let options = WriteOptions::default();
        let created = core.create(resources::core(plural), namespace, object, &options).await;
        created.unwrap().to_value()
    }

    fn signed(answer: &Value) -> Value {
        serde_json::from_str(answer["status"]["token"].as_str().unwrap()).unwrap()
    }

    /// Tokens bound to a pod of the account name the pod and its node, and are extended when
    /// they ask for a pod volume's 3607 s for the API server; binding to another account's
    /// pod, to a recreated object or to an unbindable kind is refused in Kubernetes' words.
    #[actix::test]
    async fn tokens_bind_to_a_pod_of_their_account_a_secret_or_a_node() {
        let core = crate::testing::core().await.with_token_signer(Arc::new(Plain));
        let robot =
            create(&core, "serviceaccounts", "default", json!({"metadata": {"name": "robot"}}))
                .await;
        create(&core, "serviceaccounts", "default", json!({"metadata": {"name": "other"}})).await;
        let node = create(&core, "nodes", "", json!({"metadata": {"name": "n1"}})).await;
        let pod = |name: &str, account: &str| {
            json!({"metadata": {"name": name}, "spec": {
            "serviceAccountName": account, "nodeName": "n1",
            "containers": [{"name": "c", "image": "i"}]}})
        };
        let p = create(&core, "pods", "default", pod("p", "robot")).await;
        let uid = |o: &Value| o["metadata"]["uid"].as_str().unwrap().to_string();
        let bound = |kind: &str, name: &str, uid: &str, seconds: i64| {
            json!({"spec": {
            "expirationSeconds": seconds,
            "boundObjectRef": {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}}})
        };

        let answer = core
            .request_token("default", "robot", bound("Pod", "p", &uid(&p), 3607))
            .await
            .unwrap();
        assert_eq!(answer["spec"]["audiences"], json!(["https://api"]));
        assert_eq!(answer["spec"]["boundObjectRef"]["name"], "p");
        let token = signed(&answer);
        assert_eq!(token["sa"], json!(["robot", uid(&robot)]));
        assert_eq!(token["pod"], json!(["p", uid(&p)]));
        assert_eq!(token["node"], json!(["n1", uid(&node)]));
        assert_eq!(
            (token["life"].as_i64(), token["warn"].as_i64()),
            (Some(EXTENDED_SECONDS), Some(3607))
        );
        // Its status tells the asked lifetime, not the extended one.
        let expires = answer["status"]["expirationTimestamp"].as_str().unwrap();
        let expires = chrono::DateTime::parse_from_rfc3339(expires).unwrap().timestamp();
        assert!((expires - chrono::Utc::now().timestamp() - 3607).abs() <= 2, "{answer}");
        // Not extended: another lifetime, another audience, or no pod.
        let plain =
            core.request_token("default", "robot", bound("Pod", "p", "", 3600)).await.unwrap();
        assert_eq!(
            (signed(&plain)["life"].as_i64(), &signed(&plain)["warn"]),
            (Some(3600), &Value::Null)
        );
        let mut vault = bound("Pod", "p", "", 3607);
        vault["spec"]["audiences"] = json!(["vault"]);
        let vault = signed(&core.request_token("default", "robot", vault).await.unwrap());
        assert_eq!((vault["life"].as_i64(), &vault["aud"]), (Some(3607), &json!(["vault"])));
        let to_node = signed(
            &core.request_token("default", "robot", bound("Node", "n1", "", 3607)).await.unwrap(),
        );
        assert_eq!(
            (to_node["life"].as_i64(), &to_node["pod"], &to_node["node"]),
            (Some(3607), &Value::Null, &json!(["n1", uid(&node)]))
        );
        let secret = create(&core, "secrets", "default", json!({"metadata": {"name": "s"}})).await;
        let to_secret = signed(
            &core.request_token("default", "robot", bound("Secret", "s", "", 600)).await.unwrap(),
        );
        assert_eq!(to_secret["secret"], json!(["s", uid(&secret)]));

        let refused = |request: Value, account: &'static str| {
            let core = core.clone();
            async move { core.request_token("default", account, request).await.unwrap_err().to_string() }
        };
        assert_eq!(
            refused(bound("Pod", "p", "", 3600), "other").await,
            "cannot bind token for serviceaccount \"other\" to pod running with different serviceaccount name."
        );
        assert_eq!(
            refused(bound("Pod", "p", "not-its-uid", 3600), "robot").await,
            "Operation cannot be fulfilled on Pod \"p\": the UID in the bound object reference (not-its-uid) does not match the UID in record. The object might have been deleted and then recreated"
        );
        assert_eq!(
            refused(bound("ConfigMap", "c", "", 3600), "robot").await,
            "cannot bind token to object of type /v1, Kind=ConfigMap"
        );
        assert_eq!(
            refused(bound("Pod", "gone", "", 3600), "robot").await,
            "pods \"gone\" not found"
        );
        assert_eq!(refused(bound("Pod", "", "", 3600), "robot").await, "Name parameter required.");
        let elsewhere = json!({"metadata": {"namespace": "other"}, "spec": {}});
        assert_eq!(
            refused(elsewhere, "robot").await,
            "the namespace of the provided object does not match the namespace sent on the request"
        );
        // The answer is named after the account, created now, its system fields its own.
        let answer = core
            .request_token("default", "robot", json!({"metadata": {"name": "", "uid": "mine"}}))
            .await
            .unwrap();
        let meta = &answer["metadata"];
        assert_eq!((&meta["name"], &meta["namespace"]), (&json!("robot"), &json!("default")));
        assert!(meta.get("uid").is_none() && meta["creationTimestamp"].is_string(), "{answer}");
        assert_eq!(answer["spec"]["boundObjectRef"], Value::Null);
        assert!(refused(bound("Pod", "p", "", 599), "robot").await.contains(
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        ));
    }
}

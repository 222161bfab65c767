//! The tokens controller, as Kubernetes' fills long-lived service account tokens: a Secret of
//! type `kubernetes.io/service-account-token` naming an account (annotation
//! `kubernetes.io/service-account.name`) is given that account's token, its namespace and the
//! root CA certificate (`token`, `namespace`, `ca.crt`) and the account's uid (annotation
//! `kubernetes.io/service-account.uid`). One naming an account that does not exist, or another
//! account of that name than its uid annotation says, is deleted; so are an account's token
//! Secrets when the account is deleted.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, object_namespace, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions};
use crate::model::{is_being_deleted, json, resources, ResourceType};
use crate::watch::EventType;

/// The type of the Secrets this controller fills.
pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming a token Secret's account.
pub const ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
/// The annotation holding the uid of a token Secret's account.
pub const ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";

/// Signs the long-lived token a service account token Secret holds.
pub trait TokenSigner: Send + Sync {
    /// The token of account `account` (of uid `uid`) in `namespace`, kept in Secret `secret`.
    fn sign(
        &self,
        namespace: &str,
        account: &str,
        uid: &str,
        secret: &str,
    ) -> Result<String, String>;
}

/// The account a token Secret names: its name, and its uid if the Secret says it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamedAccount {
    name: String,
    uid: String,
}

impl NamedAccount {
    /// The account `secret` names, if it names one.
    fn of(secret: &Value) -> Option<Self> {
        let annotation = |key| {
            json::at(secret, "/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let name = annotation(ACCOUNT_NAME);
        (!name.is_empty()).then(|| NamedAccount { name, uid: annotation(ACCOUNT_UID) })
    }

    /// Whether this is `account` (Kubernetes' `IsServiceAccountToken`): its name, and its uid
    /// unless none is said.
    fn is(&self, account: &Value) -> bool {
        self.name == object_name(account)
            && (self.uid.is_empty() || self.uid == object_uid(account))
    }
}

/// The actor filling token Secrets.
pub struct TokensController {
    client: Arc<dyn ApiClient>,
    signer: Arc<dyn TokenSigner>,
    /// The PEM certificate clients verify the API server with, when it serves TLS.
    root_ca: Option<Arc<str>>,
    /// The token Secrets the informer last saw, by namespace and name: the account each names
    /// and the Secret's uid.
    secrets: HashMap<(String, String), (NamedAccount, String)>,
}

/// A feed of token Secrets.
#[derive(Message)]
#[rtype(result = "()")]
struct Secrets(Feed);

/// A feed of service accounts.
#[derive(Message)]
#[rtype(result = "()")]
struct Accounts(Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopTokensController;

fn secrets() -> &'static ResourceType {
    resources::core("secrets")
}

fn accounts() -> &'static ResourceType {
    resources::core("serviceaccounts")
}

impl TokensController {
    pub fn new(
        client: Arc<dyn ApiClient>,
        signer: Arc<dyn TokenSigner>,
        root_ca: Option<&str>,
    ) -> Self {
        Self { client, signer, root_ca: root_ca.map(Arc::from), secrets: HashMap::new() }
    }

    /// Notes `secret` and gives it its token, or deletes it if its account is not there.
    fn seen(&mut self, secret: Value, ctx: &mut Context<Self>) {
        let key = (object_namespace(&secret).to_string(), object_name(&secret).to_string());
        let Some(named) = NamedAccount::of(&secret) else {
            self.secrets.remove(&key);
            return;
        };
        self.secrets.insert(key, (named, object_uid(&secret).to_string()));
        let (client, signer, root_ca) =
            (self.client.clone(), self.signer.clone(), self.root_ca.clone());
        ctx.spawn(sync(client, signer, root_ca, secret).into_actor(self));
    }

    /// Deletes the token Secrets of `account`, which is gone.
    fn account_deleted(&mut self, account: &Value, ctx: &mut Context<Self>) {
        let namespace = object_namespace(account);
        for ((ns, name), (named, uid)) in &self.secrets {
            if ns == namespace && named.is(account) {
                let (client, ns, name, uid) =
                    (self.client.clone(), ns.clone(), name.clone(), uid.clone());
                ctx.spawn(delete_secret(client, ns, name, uid).into_actor(self));
            }
        }
    }
}

/// Gives `secret` what it lacks, or deletes it when its account is not there.
async fn sync(
    client: Arc<dyn ApiClient>,
    signer: Arc<dyn TokenSigner>,
    root_ca: Option<Arc<str>>,
    secret: Value,
) {
    let Some(named) = NamedAccount::of(&secret) else { return };
    let namespace = object_namespace(&secret).to_string();
    let name = object_name(&secret).to_string();
    if is_being_deleted(&secret) {
        return;
    }
    let account = match client.get(accounts(), &namespace, &named.name).await {
        Ok(account) => Some(account),
        Err(ApiError::NotFound { .. }) => None,
        Err(error) => {
            tracing::warn!(%namespace, %name, %error, "reading a token secret's service account");
            return;
        }
    };
    let Some(account) = account.filter(|account| named.is(account)) else {
        delete_secret(client, namespace, name, object_uid(&secret).to_string()).await;
        return;
    };
    let sign = || signer.sign(&namespace, &named.name, object_uid(&account), &name);
    let filled = match filled(&secret, object_uid(&account), root_ca.as_deref(), sign) {
        Ok(Some(filled)) => filled,
        Ok(None) => return,
        Err(error) => {
            tracing::warn!(%namespace, %name, %error, "signing a service account token");
            return;
        }
    };
    // Pinned to the version read: a newer one is judged when it is seen.
    match client.update(secrets(), &namespace, filled).await {
        Ok(_) | Err(ApiError::Conflict { .. }) | Err(ApiError::NotFound { .. }) => {}
        Err(error) => tracing::warn!(%namespace, %name, %error, "filling a token secret"),
    }
}

/// Deletes the token Secret `namespace`/`name` (of uid `uid`) if its account is not there, as
/// the API server has it now.
async fn delete_if_orphaned(
    client: Arc<dyn ApiClient>,
    namespace: String,
    name: String,
    uid: String,
) {
    let Ok(secret) = client.get(secrets(), &namespace, &name).await else { return };
    let Some(named) = NamedAccount::of(&secret) else { return };
    let account = client.get(accounts(), &namespace, &named.name).await;
    let gone = match account {
        Ok(account) => !named.is(&account),
        Err(error) => matches!(error, ApiError::NotFound { .. }),
    };
    if gone && object_uid(&secret) == uid {
        delete_secret(client, namespace, name, uid).await;
    }
}

async fn delete_secret(client: Arc<dyn ApiClient>, namespace: String, name: String, uid: String) {
    let options = DeleteOptions { precondition_uid: Some(uid), ..Default::default() };
    match client.delete(secrets(), &namespace, &name, &options).await {
        Ok(_) | Err(ApiError::NotFound { .. }) | Err(ApiError::Conflict { .. }) => {}
        Err(error) => tracing::warn!(%namespace, %name, %error, "deleting a token secret"),
    }
}

/// `secret` with what Kubernetes' tokens controller gives it, if it lacks any of it: a token
/// (from `sign`) when it has none, its namespace when it has none, the root CA certificate when
/// it holds another, and the account's uid. `None` when it lacks nothing.
fn filled(
    secret: &Value,
    account_uid: &str,
    root_ca: Option<&str>,
    sign: impl FnOnce() -> Result<String, String>,
) -> Result<Option<Value>, String> {
    let data = |key: &str| {
        json::at(secret, "/data").and_then(|d| d.get(key)).and_then(Value::as_str).unwrap_or("")
    };
    let needs_token = data("token").is_empty();
    let needs_namespace = data("namespace").is_empty();
    let ca = root_ca.map(|ca| STANDARD.encode(ca));
    let needs_ca = ca.as_deref().is_some_and(|ca| data("ca.crt") != ca);
    if !needs_token && !needs_namespace && !needs_ca {
        return Ok(None);
    }
    let mut filled = secret.clone();
    if !filled["data"].is_object() {
        filled["data"] = json!({});
    }
    if needs_token {
        filled["data"]["token"] = json!(STANDARD.encode(sign()?));
    }
    if needs_namespace {
        filled["data"]["namespace"] = json!(STANDARD.encode(object_namespace(secret)));
    }
    if let (true, Some(ca)) = (needs_ca, ca) {
        filled["data"]["ca.crt"] = json!(ca);
    }
    filled["metadata"]["annotations"][ACCOUNT_UID] = json!(account_uid);
    Ok(Some(filled))
}

impl Actor for TokensController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let scope = Scope::fields(format!("type={SECRET_TYPE}"));
        informer::feed_actor(ctx, self.client.clone(), secrets(), scope, Secrets);
        informer::feed_actor(ctx, self.client.clone(), accounts(), Scope::default(), Accounts);
    }
}

/// Takes the deleted token Secret `(namespace, name)` out of the `secrets` of the account it
/// named (that account, not one created again under its name), retried on a conflict.
async fn remove_reference(
    client: Arc<dyn ApiClient>,
    (namespace, name): (String, String),
    named: NamedAccount,
) {
    for _ in 0..3 {
        let Ok(mut account) = client.get(accounts(), &namespace, &named.name).await else { return };
        if !named.is(&account) {
            return;
        }
        let Some(listed) = account.get_mut("secrets").and_then(Value::as_array_mut) else {
            return;
        };
        let before = listed.len();
        listed.retain(|reference| reference["name"] != name.as_str());
        if listed.len() == before {
            return;
        }
        match client.update(accounts(), &namespace, account).await {
            Err(ApiError::Conflict { .. }) => continue,
            Err(error) => {
                tracing::debug!(%namespace, %name, %error, "removing a token secret's reference");
                return;
            }
            Ok(_) => return,
        }
    }
}

impl Handler<Secrets> for TokensController {
    type Result = ();

    fn handle(&mut self, Secrets(feed): Secrets, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                self.secrets.clear();
                items.into_iter().for_each(|secret| self.seen(secret, ctx));
            }
            Feed::Changed(EventType::Deleted, secret) => {
                let key = (object_namespace(&secret).to_string(), object_name(&secret).to_string());
                self.secrets.remove(&key);
                // Its account no longer lists it, as Kubernetes' `removeSecretReference`.
                if let Some(named) = NamedAccount::of(&secret) {
                    let client = self.client.clone();
                    ctx.spawn(remove_reference(client, key, named).into_actor(self));
                }
            }
            Feed::Changed(_, secret) => self.seen(secret, ctx),
            Feed::Unavailable(_) => {}
        }
    }
}

impl Handler<Accounts> for TokensController {
    type Result = ();

    fn handle(&mut self, Accounts(feed): Accounts, ctx: &mut Context<Self>) {
        match feed {
            Feed::Changed(EventType::Deleted, account) => self.account_deleted(&account, ctx),
            // Accounts deleted while the watch was down: their Secrets are judged again.
            Feed::Listed(accounts) => {
                let listed: std::collections::HashSet<(&str, &str)> =
                    accounts.iter().map(|a| (object_namespace(a), object_name(a))).collect();
                let orphans: Vec<(String, String, String)> = (self.secrets.iter())
                    .filter(|((ns, _), (named, _))| {
                        !listed.contains(&(ns.as_str(), named.name.as_str()))
                    })
                    .map(|((ns, name), (_, uid))| (ns.clone(), name.clone(), uid.clone()))
                    .collect();
                for (namespace, name, uid) in orphans {
                    let client = self.client.clone();
                    ctx.spawn(delete_if_orphaned(client, namespace, name, uid).into_actor(self));
                }
            }
            _ => {}
        }
    }
}

impl Handler<StopTokensController> for TokensController {
    type Result = ();

    fn handle(&mut self, _: StopTokensController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::WriteOptions;
    use crate::testing::{core, eventually};

    /// Signs with no key: the token says whose it is.
    struct Named;

    impl TokenSigner for Named {
        fn sign(&self, ns: &str, account: &str, uid: &str, secret: &str) -> Result<String, String> {
            Ok(format!("{ns}/{account}/{uid}/{secret}"))
        }
    }

    fn token_secret(name: &str, account: &str) -> Value {
        json!({"metadata": {"name": name, "annotations": {ACCOUNT_NAME: account}},
            "type": SECRET_TYPE})
    }

    fn decoded(secret: &Value, key: &str) -> String {
        let data = secret["data"][key].as_str().unwrap_or_default();
        String::from_utf8(STANDARD.decode(data).unwrap()).unwrap()
    }

    #[test]
    fn a_secret_is_filled_with_what_it_lacks_only() {
        let mut secret = token_secret("t", "build");
        secret["metadata"]["namespace"] = json!("ci");
        let once = filled(&secret, "u1", Some("PEM"), || Ok("tok".into())).unwrap().unwrap();
        assert_eq!(decoded(&once, "token"), "tok");
        assert_eq!(decoded(&once, "namespace"), "ci");
        assert_eq!(decoded(&once, "ca.crt"), "PEM");
        assert_eq!(once["metadata"]["annotations"][ACCOUNT_UID], "u1");
        let never = || -> Result<String, String> { panic!("signed again") };
        assert_eq!(filled(&once, "u1", Some("PEM"), never).unwrap(), None);
        // A new root CA is written over the old; the token stays.
        let renewed = filled(&once, "u1", Some("NEW"), never).unwrap().unwrap();
        assert_eq!(
            (decoded(&renewed, "ca.crt"), decoded(&renewed, "token")),
            ("NEW".into(), "tok".into())
        );
        // Without TLS there is no CA to give.
        let plain = filled(&secret, "u1", None, || Ok("tok".into())).unwrap().unwrap();
        assert!(plain["data"].get("ca.crt").is_none());
    }

    #[actix::test]
    async fn token_secrets_get_their_accounts_token_and_go_with_their_account() {
        let core = core().await;
        TokensController::new(Arc::new(core.clone()), Arc::new(Named), Some("PEM")).start();
        let write = WriteOptions::default();
        let account = json!({"metadata": {"name": "build"}});
        let account = core.create(accounts(), "default", account, &write).await.unwrap();
        let uid = object_uid(&account.to_value()).to_string();
        core.create(secrets(), "default", token_secret("build-token", "build"), &write)
            .await
            .unwrap();
        let get = |name: &'static str| {
            let core = core.clone();
            async move { core.get(secrets(), "default", name).await.ok().map(|s| s.to_value()) }
        };
        let filled = eventually("the token written", || async {
            get("build-token").await.filter(|s| s["data"].get("token").is_some())
        })
        .await;
        assert_eq!(decoded(&filled, "token"), format!("default/build/{uid}/build-token"));
        assert_eq!(decoded(&filled, "namespace"), "default");
        assert_eq!(decoded(&filled, "ca.crt"), "PEM");
        assert_eq!(filled["metadata"]["annotations"][ACCOUNT_UID], json!(uid));

        // One naming an account that is not there, or another account of its name, goes.
        core.create(secrets(), "default", token_secret("orphan", "nobody"), &write).await.unwrap();
        let mut other = token_secret("other", "build");
        other["metadata"]["annotations"][ACCOUNT_UID] = json!("not-build-s-uid");
        core.create(secrets(), "default", other, &write).await.unwrap();
        eventually("secrets of no account deleted", || async {
            (get("orphan").await.is_none() && get("other").await.is_none()).then_some(())
        })
        .await;
        assert!(get("build-token").await.is_some());

        // A token Secret deleted leaves its account's list of secrets.
        let mut listing = core.get(accounts(), "default", "build").await.unwrap().to_value();
        listing["secrets"] = json!([{"name": "spare"}, {"name": "kept"}]);
        core.update(accounts(), "default", "build", listing, &write).await.unwrap();
        core.create(secrets(), "default", token_secret("spare", "build"), &write).await.unwrap();
        eventually("the spare token written", || async {
            get("spare").await.filter(|s| s["data"].get("token").is_some())
        })
        .await;
        core.delete(secrets(), "default", "spare", &DeleteOptions::default()).await.unwrap();
        eventually("the spare token's reference gone", || async {
            let account = core.get(accounts(), "default", "build").await.unwrap().to_value();
            (account["secrets"] == json!([{"name": "kept"}])).then_some(())
        })
        .await;

        // The account's deletion takes its token Secrets with it.
        core.delete(accounts(), "default", "build", &DeleteOptions::default()).await.unwrap();
        eventually("the account's token deleted", || async {
            get("build-token").await.is_none().then_some(())
        })
        .await;
    }
}

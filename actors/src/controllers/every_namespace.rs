//! Keeps one object in every namespace that is not being deleted, as Kubernetes' controllers
//! that do so: created with the namespace, again if it is deleted, and put back when changed
//! where the object asks for it. Two run in the server: the `default` ServiceAccount (the
//! service account controller) and, with the secure port on, the `kube-root-ca.crt` ConfigMap
//! holding the certificate that clients verify the API server with (the root CA certificate
//! publisher).

use std::collections::BTreeSet;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::{ApiError, DEFAULT_SERVICE_ACCOUNT};
use crate::model::{json, resources, ResourceType};
use crate::watch::EventType;

/// The name of the ConfigMap holding the root CA certificate.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The annotation that says what the root CA ConfigMap is for, and its text (Kubernetes').
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the \
kube-apiserver when using internal endpoints such as the internal service IP or \
kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The object each namespace gets.
pub struct Kept {
    resource: &'static ResourceType,
    /// The object as it is created (`metadata.name` names it).
    object: Value,
    /// Given the object found and `object`, what to write back when the found one has
    /// changed in a way that must be undone; `None` keeps any change.
    repair: Option<fn(&Value, &Value) -> Option<Value>>,
}

impl Kept {
    /// The `default` ServiceAccount (changes to it are kept).
    pub fn default_service_account() -> Kept {
        Kept {
            resource: resources::core("serviceaccounts"),
            object: json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": DEFAULT_SERVICE_ACCOUNT}}),
            repair: None,
        }
    }

    /// The `kube-root-ca.crt` ConfigMap with the PEM certificate `ca` under `ca.crt`, and its
    /// description: both are put back when changed.
    pub fn root_ca(ca: &str) -> Kept {
        Kept {
            resource: resources::core("configmaps"),
            object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": ROOT_CA_CONFIG_MAP,
                    "annotations": {DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION}},
                "data": {"ca.crt": ca}}),
            repair: Some(root_ca_repaired),
        }
    }

    fn name(&self) -> &str {
        json::at(&self.object, "/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }
}

/// The root CA ConfigMap `found` with the data and description of `wanted` (Kubernetes'
/// publisher), unless it has them.
fn root_ca_repaired(found: &Value, wanted: &Value) -> Option<Value> {
    let described = json::at(found, "/metadata/annotations")
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|d| !d.is_empty());
    if found.get("data") == wanted.get("data") && described {
        return None;
    }
    let mut repaired = found.clone();
    repaired["data"] = wanted["data"].clone();
    let metadata = &mut repaired["metadata"];
    if !metadata["annotations"].is_object() {
        metadata["annotations"] = json!({});
    }
    metadata["annotations"][DESCRIPTION_ANNOTATION] = json!(ROOT_CA_DESCRIPTION);
    Some(repaired)
}

/// The actor keeping one [`Kept`] object in every namespace.
pub struct EveryNamespace {
    client: Arc<dyn ApiClient>,
    kept: Kept,
    /// The namespaces not being deleted, as the informer last saw them.
    active: BTreeSet<String>,
}

/// A feed of namespaces.
#[derive(Message)]
#[rtype(result = "()")]
struct Namespaces(Feed);

/// A feed of the kept objects.
#[derive(Message)]
#[rtype(result = "()")]
struct Objects(Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopEveryNamespace;

fn namespaces() -> &'static ResourceType {
    resources::core("namespaces")
}

impl EveryNamespace {
    pub fn new(client: Arc<dyn ApiClient>, kept: Kept) -> Self {
        Self { client, kept, active: BTreeSet::new() }
    }

    /// Creates the object in each of `namespaces` that is active and lacks it.
    fn ensure(&mut self, namespaces: Vec<String>, ctx: &mut Context<Self>) {
        for namespace in namespaces.into_iter().filter(|ns| self.active.contains(ns)) {
            let (client, resource) = (self.client.clone(), self.kept.resource);
            let (object, name) = (self.kept.object.clone(), self.kept.name().to_string());
            ctx.spawn(
                async move {
                    match client.create(resource, &namespace, object).await {
                        // There already, or the namespace is going (or gone) meanwhile.
                        Ok(_)
                        | Err(ApiError::AlreadyExists { .. })
                        | Err(ApiError::ForbiddenWrite { .. })
                        | Err(ApiError::NotFound { .. }) => {}
                        Err(error) => tracing::warn!(%namespace, %error, %name, "creating"),
                    }
                }
                .into_actor(self),
            );
        }
    }

    /// Puts `found` back as it should be, if it must be.
    fn repair(&mut self, found: &Value, ctx: &mut Context<Self>) {
        let Some(repaired) = self.kept.repair.and_then(|r| r(found, &self.kept.object)) else {
            return;
        };
        let namespace = json::at(found, "/metadata/namespace").and_then(Value::as_str);
        let namespace = namespace.unwrap_or_default().to_string();
        let (client, resource) = (self.client.clone(), self.kept.resource);
        ctx.spawn(
            async move {
                // Pinned to the version found: a newer one is judged when it is seen.
                match client.update(resource, &namespace, repaired).await {
                    Ok(_) | Err(ApiError::Conflict { .. }) | Err(ApiError::NotFound { .. }) => {}
                    Err(error) => tracing::warn!(%namespace, %error, "putting an object back"),
                }
            }
            .into_actor(self),
        );
    }
}

fn is_active(namespace: &Value) -> bool {
    json::at(namespace, "/metadata/deletionTimestamp").is_none_or(Value::is_null)
}

impl Actor for EveryNamespace {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, namespaces(), Scope::default(), Namespaces);
        let scope = Scope::fields(format!("metadata.name={}", self.kept.name()));
        let client = self.client.clone();
        informer::feed_actor(ctx, client, self.kept.resource, scope, Objects);
    }
}

impl Handler<Namespaces> for EveryNamespace {
    type Result = ();

    fn handle(&mut self, Namespaces(feed): Namespaces, ctx: &mut Context<Self>) {
        let seen = match feed {
            Feed::Listed(items) => {
                self.active = items
                    .iter()
                    .filter(|ns| is_active(ns))
                    .map(|ns| object_name(ns).to_string())
                    .collect();
                self.active.iter().cloned().collect()
            }
            Feed::Changed(kind, namespace) => {
                let name = object_name(&namespace).to_string();
                if kind == EventType::Deleted || !is_active(&namespace) {
                    self.active.remove(&name);
                    return;
                }
                // Only a namespace new to the controller needs its object created here.
                if !self.active.insert(name.clone()) {
                    return;
                }
                vec![name]
            }
            Feed::Unavailable(_) => return,
        };
        self.ensure(seen, ctx);
    }
}

impl Handler<Objects> for EveryNamespace {
    type Result = ();

    fn handle(&mut self, Objects(feed): Objects, ctx: &mut Context<Self>) {
        match feed {
            Feed::Changed(EventType::Deleted, object) => {
                let namespace = json::at(&object, "/metadata/namespace").and_then(Value::as_str);
                self.ensure(vec![namespace.unwrap_or("").to_string()], ctx);
            }
            Feed::Changed(_, object) => self.repair(&object, ctx),
            Feed::Listed(items) => items.iter().for_each(|object| self.repair(object, ctx)),
            Feed::Unavailable(_) => {}
        }
    }
}

impl Handler<StopEveryNamespace> for EveryNamespace {
    type Result = ();

    fn handle(&mut self, _: StopEveryNamespace, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{DeleteOptions, WriteOptions};
    use crate::testing::{core, eventually};

    #[actix::test]
    async fn every_namespace_gets_the_root_ca_back_when_it_is_deleted_or_changed() {
        let core = core().await;
        EveryNamespace::new(Arc::new(core.clone()), Kept::root_ca("PEM")).start();
        let maps = resources::core("configmaps");
        let get = |namespace: &'static str| {
            let core = core.clone();
            async move { core.get(maps, namespace, ROOT_CA_CONFIG_MAP).await.ok() }
        };
        let published = eventually("the default namespace's", || get("default")).await;
        let published = published.to_value();
        assert_eq!(published["data"], json!({"ca.crt": "PEM"}));
        assert_eq!(
            published["metadata"]["annotations"][DESCRIPTION_ANNOTATION],
            ROOT_CA_DESCRIPTION
        );
        let team = json!({"metadata": {"name": "team"}});
        core.create(namespaces(), "", team, &WriteOptions::default()).await.unwrap();
        eventually("a new namespace's", || get("team")).await;
        let options = DeleteOptions::default();
        core.delete(maps, "team", ROOT_CA_CONFIG_MAP, &options).await.unwrap();
        eventually("created again", || get("team")).await;
        let mut changed = published.clone();
        changed["data"] = json!({"ca.crt": "other"});
        core.update(maps, "default", ROOT_CA_CONFIG_MAP, changed, &WriteOptions::default())
            .await
            .unwrap();
        eventually("put back", || async {
            let found = get("default").await?.to_value();
            (found["data"]["ca.crt"] == "PEM").then_some(())
        })
        .await;
    }
}

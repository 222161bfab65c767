//! Keeps the system namespaces (`default`, `kube-system`, `kube-public`, `kube-node-lease`)
//! there, as Kubernetes' system namespaces controller does: one deleted (only
//! `kube-node-lease` may be) is created again once it is gone, so that node agents can renew
//! their leases in it again rather than be taken as silent. It follows namespaces, and checks
//! once a minute besides, as Kubernetes' does.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::json;

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::{ApiError, SYSTEM_NAMESPACES};
use crate::model::resources;
use crate::watch::EventType;

/// How often the namespaces are checked besides what the list-watch reports.
const CHECK_EVERY: Duration = Duration::from_secs(60);

/// The system namespaces controller actor.
pub struct SystemNamespaces {
    client: Arc<dyn ApiClient>,
    /// The namespaces there (being deleted or not), once the list-watch has listed them.
    present: Option<BTreeSet<String>>,
}

/// A feed of namespaces.
#[derive(Message)]
#[rtype(result = "()")]
struct Informed(Feed);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopSystemNamespaces;

impl SystemNamespaces {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self { client, present: None }
    }

    /// Creates each system namespace that is not there (one still being deleted is there
    /// until it goes).
    fn ensure(&mut self, ctx: &mut Context<Self>) {
        let Some(present) = &self.present else { return };
        for name in SYSTEM_NAMESPACES.iter().filter(|ns| !present.contains(**ns)) {
            let client = self.client.clone();
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name}});
            ctx.spawn(
                async move {
                    let namespaces = resources::core("namespaces");
                    match client.create(namespaces, "", namespace).await {
                        Ok(_) => {
                            tracing::info!(namespace = name, "created a system namespace again")
                        }
                        Err(ApiError::AlreadyExists { .. }) => {}
                        Err(error) => tracing::warn!(namespace = name, %error, "creating"),
                    }
                }
                .into_actor(self),
            );
        }
    }
}

impl Actor for SystemNamespaces {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (client, namespaces) = (self.client.clone(), resources::core("namespaces"));
        informer::feed_actor(ctx, client, namespaces, Scope::default(), Informed);
        ctx.run_interval(CHECK_EVERY, |controller, ctx| controller.ensure(ctx));
    }
}

impl Handler<Informed> for SystemNamespaces {
    type Result = ();

    fn handle(&mut self, Informed(feed): Informed, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                self.present = Some(items.iter().map(|ns| object_name(ns).to_string()).collect());
            }
            Feed::Changed(kind, namespace) => {
                let Some(present) = &mut self.present else { return };
                let name = object_name(&namespace).to_string();
                if kind == EventType::Deleted {
                    present.remove(&name);
                } else {
                    present.insert(name);
                }
            }
            Feed::Unavailable(_) => return,
        }
        self.ensure(ctx);
    }
}

impl Handler<StopSystemNamespaces> for SystemNamespaces {
    type Result = ();

    fn handle(&mut self, _: StopSystemNamespaces, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::DeleteOptions;
    use crate::testing::{core, eventually};

    #[actix::test]
    async fn a_deleted_system_namespace_is_created_again_once_gone() {
        let core = core().await;
        SystemNamespaces::new(Arc::new(core.clone())).start();
        let namespaces = resources::core("namespaces");
        let first = core.get(namespaces, "", "kube-node-lease").await.unwrap();
        // No namespace controller runs here: the namespace goes once its finalizer is gone.
        let options = DeleteOptions::default();
        let marked = core.delete(namespaces, "", "kube-node-lease", &options).await.unwrap();
        let mut marked = marked.to_value();
        marked["spec"]["finalizers"] = json!([]);
        core.finalize("kube-node-lease", marked, &Default::default()).await.unwrap();
        let again = eventually("created again", || async {
            let found = core.get(namespaces, "", "kube-node-lease").await.ok()?;
            (found.uid != first.uid).then_some(found)
        })
        .await;
        assert!(!again.deleting);
    }
}

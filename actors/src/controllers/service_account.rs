//! The service account controller: every namespace that is not being deleted has a
//! ServiceAccount named `default`, as Kubernetes' controller ensures (created with the
//! namespace, and again if it is deleted).

use std::collections::BTreeSet;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::{ApiError, DEFAULT_SERVICE_ACCOUNT};
use crate::model::{json, resources, ResourceType};
use crate::watch::EventType;

/// The service account controller actor.
pub struct ServiceAccountController {
    client: Arc<dyn ApiClient>,
    /// The namespaces not being deleted, as the informer last saw them.
    active: BTreeSet<String>,
}

/// A feed of namespaces.
#[derive(Message)]
#[rtype(result = "()")]
struct Namespaces(Feed);

/// A feed of the `default` service accounts.
#[derive(Message)]
#[rtype(result = "()")]
struct Accounts(Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopServiceAccountController;

fn namespaces() -> &'static ResourceType {
    resources::core("namespaces")
}

fn accounts() -> &'static ResourceType {
    resources::core("serviceaccounts")
}

impl ServiceAccountController {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self { client, active: BTreeSet::new() }
    }

    /// Creates the `default` account of each of `namespaces` that is active and lacks it.
    fn ensure(&mut self, namespaces: Vec<String>, ctx: &mut Context<Self>) {
        for namespace in namespaces.into_iter().filter(|ns| self.active.contains(ns)) {
            let client = self.client.clone();
            let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": DEFAULT_SERVICE_ACCOUNT}});
            ctx.spawn(
                async move {
                    match client.create(accounts(), &namespace, account).await {
                        // There already, or the namespace is going (or gone) meanwhile.
                        Ok(_)
                        | Err(ApiError::AlreadyExists { .. })
                        | Err(ApiError::ForbiddenWrite { .. })
                        | Err(ApiError::NotFound { .. }) => {}
                        Err(error) => {
                            tracing::warn!(%namespace, %error, "creating the default account")
                        }
                    }
                }
                .into_actor(self),
            );
        }
    }
}

fn is_active(namespace: &Value) -> bool {
    json::at(namespace, "/metadata/deletionTimestamp").is_none_or(Value::is_null)
}

impl Actor for ServiceAccountController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, namespaces(), Scope::default(), Namespaces);
        let scope = Scope::fields(format!("metadata.name={DEFAULT_SERVICE_ACCOUNT}"));
        let client = self.client.clone();
        informer::feed_actor(ctx, client, accounts(), scope, Accounts);
    }
}

impl Handler<Namespaces> for ServiceAccountController {
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
                // Only a namespace new to the controller needs its account created here.
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

impl Handler<Accounts> for ServiceAccountController {
    type Result = ();

    fn handle(&mut self, Accounts(feed): Accounts, ctx: &mut Context<Self>) {
        if let Feed::Changed(EventType::Deleted, account) = feed {
            let namespace = json::at(&account, "/metadata/namespace").and_then(Value::as_str);
            self.ensure(vec![namespace.unwrap_or("").to_string()], ctx);
        }
    }
}

impl Handler<StopServiceAccountController> for ServiceAccountController {
    type Result = ();

    fn handle(&mut self, _: StopServiceAccountController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

//! The ClusterRole aggregation controller: a ClusterRole with an `aggregationRule` gets as its
//! rules those of every other ClusterRole its `clusterRoleSelectors` select (any of them), the
//! roles taken in name order and a rule already there not added twice, as Kubernetes'
//! controller does. That is how `admin`, `edit` and `view` grow: a role labelled
//! `rbac.authorization.k8s.io/aggregate-to-view: "true"` adds its rules to `view`.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::Value;

use crate::client::cache::apply_feed;
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::ApiError;
use crate::model::{json, resources, ResourceType};
use crate::model::{LabelSelector, Labels};

/// The controller actor.
pub struct ClusterRoleAggregator {
    client: Arc<dyn ApiClient>,
    /// Every ClusterRole, by name, as the informer last saw it (listed before any change is
    /// reported).
    roles: BTreeMap<String, Value>,
}

/// A feed of ClusterRoles.
#[derive(Message)]
#[rtype(result = "()")]
struct Roles(Feed);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopClusterRoleAggregator;

fn cluster_roles() -> &'static ResourceType {
    resources::find(resources::RBAC_GROUP, "v1", "clusterroles").expect("served")
}

/// The rules `role` aggregates from `roles`, or None when it has no aggregation rule (or one
/// with a selector that is no selector, which Kubernetes' controller leaves be). As there:
/// selector by selector, the roles each selects by name, each rule once (empty and missing
/// lists alike); an aggregation rule selecting nothing aggregates no rules.
pub fn aggregated_rules(role: &Value, roles: &BTreeMap<String, Value>) -> Option<Vec<Value>> {
    let rule = json::at(role, "/aggregationRule").filter(|rule| rule.is_object())?;
    let selectors = rule.get("clusterRoleSelectors").and_then(Value::as_array);
    let selectors: Vec<LabelSelector> = selectors
        .into_iter()
        .flatten()
        .map(LabelSelector::from_object)
        .collect::<Result<_, _>>()
        .ok()?;
    let name = object_name(role);
    let mut rules: Vec<Value> = Vec::new();
    for selector in &selectors {
        for (other, candidate) in roles {
            if other == name || !selector.matches(&Labels::of(candidate)) {
                continue;
            }
            let theirs = json::at(candidate, "/rules").and_then(Value::as_array);
            for rule in theirs.into_iter().flatten() {
                if !rules.iter().any(|r| same_rule(r, rule)) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Whether two policy rules say the same (as Kubernetes' semantic equality compares them: an
/// empty list and a missing one alike).
fn same_rule(a: &Value, b: &Value) -> bool {
    let said = |rule: &Value| -> Vec<(String, Value)> {
        let fields = rule.as_object().into_iter().flatten();
        let empty = |v: &Value| v.is_null() || v.as_array().is_some_and(Vec::is_empty);
        fields.filter(|(_, v)| !empty(v)).map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    said(a) == said(b)
}

impl ClusterRoleAggregator {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self { client, roles: BTreeMap::new() }
    }

    /// Writes the rules of each aggregating role whose rules are not what it aggregates.
    fn aggregate(&mut self, ctx: &mut Context<Self>) {
        for role in self.roles.values() {
            let Some(rules) = aggregated_rules(role, &self.roles) else { continue };
            // No rules, null or empty, are alike (as Kubernetes' semantic equality has them).
            let current = json::at(role, "/rules").and_then(Value::as_array);
            if current.map_or(&[][..], Vec::as_slice) == rules.as_slice() {
                continue;
            }
            // None aggregated: the role has none (`rules` left out, as Kubernetes' apply of
            // no rules leaves it).
            let mut updated = role.clone();
            match updated.as_object_mut() {
                Some(fields) if rules.is_empty() => {
                    fields.remove("rules");
                }
                _ => updated["rules"] = Value::Array(rules),
            }
            let client = self.client.clone();
            ctx.spawn(
                async move {
                    let name = object_name(&updated).to_string();
                    match client.update(cluster_roles(), "", updated).await {
                        // A conflict or a deletion brings an event of its own, and with it
                        // another try.
                        Ok(_) | Err(ApiError::Conflict { .. }) | Err(ApiError::NotFound { .. }) => {
                        }
                        Err(error) => tracing::warn!(%name, %error, "aggregating a ClusterRole"),
                    }
                }
                .into_actor(self),
            );
        }
    }
}

impl Actor for ClusterRoleAggregator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, cluster_roles(), Scope::default(), Roles);
    }
}

impl Handler<Roles> for ClusterRoleAggregator {
    type Result = ();

    fn handle(&mut self, Roles(feed): Roles, ctx: &mut Context<Self>) {
        let name_of = |role: &Value| object_name(role).to_string();
        // Nothing changed when the server could not be reached.
        if !apply_feed(&mut self.roles, feed, name_of, |role| role).is_empty() {
            self.aggregate(ctx);
        }
    }
}

impl Handler<StopClusterRoleAggregator> for ClusterRoleAggregator {
    type Result = ();

    fn handle(&mut self, _: StopClusterRoleAggregator, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{core, eventually};
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn rules_come_selector_by_selector_from_the_roles_in_name_order_once_each() {
        let read = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let write = json!({"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]});
        let mut view = role("view", json!({}), json!([]));
        view["aggregationRule"] = json!({"clusterRoleSelectors": [
            {"matchLabels": {"aggregate-to-view": "true"}},
            {"matchExpressions": [{"key": "extra", "operator": "Exists"}]}]});
        let roles: BTreeMap<String, Value> = [
            role("b", json!({"aggregate-to-view": "true"}), json!([read, write])),
            role("a", json!({"extra": "1"}), json!([write])),
            role("c", json!({"aggregate-to-view": "false"}), json!([read])),
            view.clone(),
        ]
        .into_iter()
        .map(|r| (object_name(&r).to_string(), r))
        .collect();
        // `b` (the first selector's) before `a` (the second's), though `a` sorts first.
        assert_eq!(aggregated_rules(&view, &roles), Some(vec![read.clone(), write.clone()]));
        assert_eq!(aggregated_rules(&roles["a"], &roles), None, "no aggregation rule");
        // A rule with empty lists is the rule without them.
        let mut spelled = read.clone();
        spelled["resourceNames"] = json!([]);
        assert!(same_rule(&read, &spelled) && !same_rule(&read, &write));
        // An aggregation rule selecting nothing aggregates nothing; a bad selector, no change.
        let mut empty = view.clone();
        empty["aggregationRule"] = json!({});
        assert_eq!(aggregated_rules(&empty, &roles), Some(vec![]));
        let mut bad = view.clone();
        bad["aggregationRule"] = json!({"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "k", "operator": "Sideways"}]}]});
        assert_eq!(aggregated_rules(&bad, &roles), None);
    }

    #[actix::test]
    async fn an_aggregating_role_follows_the_roles_it_selects() {
        let core = core().await;
        let client: Arc<dyn ApiClient> = Arc::new(core.clone());
        let mut reader = role("reader", json!({}), json!([]));
        reader["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"to-reader": "true"}}]});
        client.create(cluster_roles(), "", reader).await.unwrap();
        let aggregator = ClusterRoleAggregator::new(client.clone()).start();
        let pods = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let labels = json!({"to-reader": "true"});
        client.create(cluster_roles(), "", role("pods", labels, json!([pods]))).await.unwrap();
        let rules = || async {
            let reader = client.get(cluster_roles(), "", "reader").await.unwrap();
            reader["rules"].clone()
        };
        eventually("the role's rules aggregated", async || {
            (rules().await == json!([pods])).then_some(())
        })
        .await;
        client.delete(cluster_roles(), "", "pods", &Default::default()).await.unwrap();
        // None left: the field goes (Kubernetes' `rules: null`).
        eventually("the deleted role's rules gone", async || {
            (rules().await == Value::Null).then_some(())
        })
        .await;
        aggregator.send(StopClusterRoleAggregator).await.unwrap();
    }
}

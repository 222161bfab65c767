//! The node's Lease in kube-node-lease, the agent's heartbeat, and which agent holds the node.
//!
//! The kubelet names the node itself as the lease's `holderIdentity`; an agent also writes its
//! own name there, as an annotation (the one kept in its data dir, see [`super::data_dir`]).
//! Another agent given the same node name finds the lease renewed by someone else and does not
//! take the node over while that lease lasts: two agents running one node's pods stop each
//! other's containers. A restarted agent is the same agent and takes its node back at once;
//! one that stops cleanly lets go of the node, so that another may take it at once.

use chrono::Utc;
use serde_json::{json, Value};

use super::AgentConfig;
use crate::client::ApiClient;
use crate::core::{ApiError, PatchType};
use crate::model::json;
use crate::model::resources::{self, leases, NODE_LEASE_NAMESPACE};

/// The lease's annotation naming the agent that renews it.
pub const HOLDER_ANNOTATION: &str = "kplane.io/agent";

/// Another agent renews the lease of the node this one was given.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "node {node} is held by another agent{at}, which renewed its lease {renewed_ago} s ago: \
     stop that agent, or give this one another node name (agent.node_name, --node-name)"
)]
pub struct HeldByAnother {
    node: String,
    /// Where the other agent is, as its Node says (` at 127.0.0.1:10250`), when it says.
    at: String,
    renewed_ago: i64,
}

/// Why an agent's node is no longer its own.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NodeLost {
    #[error(
        "node {} is renewed by another agent{} now (it registered the node anew)",
        .0.node,
        .0.at
    )]
    HeldByAnother(#[from] HeldByAnother),
    #[error("node {0} was deleted and made again since this agent registered it")]
    MadeAgain(String),
}

/// The agent, other than this one, that holds the node `config` names: the one its lease
/// names, while that lease lasts (renewed within its duration). `None` for an agent that has
/// no name of its own (`config.identity`), for a lease that names no agent, and for an
/// expired one.
pub async fn held_by_another(
    config: &AgentConfig,
    client: &dyn ApiClient,
) -> Result<Option<HeldByAnother>, ApiError> {
    let Some(identity) = &config.identity else { return Ok(None) };
    let name = &config.node_name;
    let lease = match client.get(leases(), NODE_LEASE_NAMESPACE, name).await {
        Ok(lease) => lease,
        Err(ApiError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    match renewed_by_another(&lease, identity) {
        Some(renewed_ago) => Ok(Some(another_holder(client, name, renewed_ago).await)),
        None => Ok(None),
    }
}

/// The other agent renewing `lease`, while it lasts (none for an agent without a name).
async fn lost_to_another(
    client: &dyn ApiClient,
    config: &AgentConfig,
    lease: &Value,
) -> Option<NodeLost> {
    let renewed_ago = renewed_by_another(lease, config.identity.as_deref()?)?;
    Some(another_holder(client, &config.node_name, renewed_ago).await.into())
}

/// How many seconds ago another agent than `identity` renewed `lease`, while it lasts.
fn renewed_by_another(lease: &Value, identity: &str) -> Option<i64> {
    let holder = lease["metadata"]["annotations"][HOLDER_ANNOTATION].as_str()?;
    if holder == identity {
        return None;
    }
    let renewed = lease["spec"]["renewTime"].as_str()?;
    let renewed = chrono::DateTime::parse_from_rfc3339(renewed).ok()?;
    let renewed_ago = (Utc::now() - renewed.with_timezone(&Utc)).num_seconds().max(0);
    let lasts = lease["spec"]["leaseDurationSeconds"].as_i64().unwrap_or(40);
    (renewed_ago < lasts).then_some(renewed_ago)
}

/// The other agent holding node `name`, where its Node says it is.
async fn another_holder(client: &dyn ApiClient, name: &str, renewed_ago: i64) -> HeldByAnother {
    let at = match client.get(resources::core("nodes"), "", name).await {
        Ok(node) => endpoint(&node).map(|at| format!(" at {at}")).unwrap_or_default(),
        Err(_) => String::new(),
    };
    HeldByAnother { node: name.to_string(), at, renewed_ago }
}

/// The address and port a Node's agent serves at (its InternalIP and kubelet endpoint).
fn endpoint(node: &Value) -> Option<String> {
    let addresses = node["status"]["addresses"].as_array()?;
    let internal = addresses.iter().find(|a| a["type"] == "InternalIP")?["address"].as_str()?;
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"].as_u64()?;
    Some(format!("{internal}:{port}"))
}

/// Creates or renews the node's Lease in kube-node-lease, owned by the node (as the kubelet
/// sets it, so that the garbage collector removes it with the node), naming this agent. Not
/// when the node is no longer this agent's (the one it registered as `node_uid`, when given):
/// another agent renews the lease (one that registered the node anew after it was deleted),
/// or the node was made again; then why is returned.
pub(super) async fn renew_lease(
    config: &AgentConfig,
    client: &dyn ApiClient,
    node_uid: Option<&str>,
) -> Result<Option<NodeLost>, ApiError> {
    let renew = crate::model::now_micro();
    let seconds = config.lease_duration.as_secs();
    let name = &config.node_name;
    let annotations = config.identity.as_ref().map(|id| json!({ HOLDER_ANNOTATION: id }));
    let made_again = |owner_uid: Option<&str>| match (node_uid, owner_uid) {
        (Some(ours), Some(theirs)) if ours != theirs => Some(NodeLost::MadeAgain(name.clone())),
        _ => None,
    };
    match client.get(leases(), NODE_LEASE_NAMESPACE, name).await {
        Ok(lease) => {
            if let Some(lost) = lost_to_another(client, config, &lease).await {
                return Ok(Some(lost));
            }
            let owner_uid = lease["metadata"]["ownerReferences"][0]["uid"].as_str();
            if let Some(lost) = made_again(owner_uid) {
                return Ok(Some(lost));
            }
            // Only the lease as read: of two agents renewing it, one is refused (and then
            // finds the other's name on it).
            let version = lease["metadata"]["resourceVersion"].clone();
            let mut patch = json!({"metadata": {"resourceVersion": version},
                "spec": {"renewTime": renew, "holderIdentity": name,
                "leaseDurationSeconds": seconds}});
            let owned = json::at(&lease, "/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|owners| !owners.is_empty());
            if !owned {
                if let Some(owner) = node_owner(client, name).await? {
                    if let Some(lost) = made_again(owner["uid"].as_str()) {
                        return Ok(Some(lost));
                    }
                    patch["metadata"]["ownerReferences"] = json!([owner]);
                }
            }
            if let Some(annotations) = annotations {
                patch["metadata"]["annotations"] = annotations;
            }
            client
                .patch(leases(), NODE_LEASE_NAMESPACE, name, PatchType::Merge, &patch, false)
                .await?;
        }
        Err(ApiError::NotFound { .. }) => {
            // Made only owned by its node, as the kubelet's lease controller makes it: a lease
            // made while the node is not there (deleted) would outlive it for good.
            let Some(owner) = node_owner(client, name).await? else {
                // As the kubelet's every failed heartbeat, said each time.
                tracing::warn!(node = %name, "the node is not registered (it was deleted): \
                    no lease is renewed; restart the agent to register it again");
                return Ok(None);
            };
            if let Some(lost) = made_again(owner["uid"].as_str()) {
                return Ok(Some(lost));
            }
            let mut lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE,
                    "ownerReferences": [owner]},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": seconds,
                    "renewTime": renew},
            });
            if let Some(annotations) = annotations {
                lease["metadata"]["annotations"] = annotations;
            }
            match client.create(leases(), NODE_LEASE_NAMESPACE, lease).await {
                Ok(_) => {}
                // Another agent made it meanwhile (both registering the node at once).
                Err(ApiError::AlreadyExists { .. }) => {
                    let lease = client.get(leases(), NODE_LEASE_NAMESPACE, name).await?;
                    return Ok(lost_to_another(client, config, &lease).await);
                }
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    }
    Ok(None)
}

/// Lets go of the node on a clean stop: takes this agent's name off its lease, if the lease
/// still names it, so that another agent may take the node without waiting for the lease to
/// expire. The lease itself stays (the node's heartbeat, as the kubelet leaves it).
pub(super) async fn let_go(config: &AgentConfig, client: &dyn ApiClient) -> Result<(), ApiError> {
    let Some(identity) = &config.identity else { return Ok(()) };
    let name = &config.node_name;
    let lease = match client.get(leases(), NODE_LEASE_NAMESPACE, name).await {
        Ok(lease) => lease,
        Err(ApiError::NotFound { .. }) => return Ok(()),
        Err(error) => return Err(error),
    };
    if lease["metadata"]["annotations"][HOLDER_ANNOTATION].as_str() != Some(identity) {
        return Ok(());
    }
    // Only the lease as read: another agent may have taken it since.
    let version = lease["metadata"]["resourceVersion"].clone();
    let patch = json!({"metadata": {"resourceVersion": version,
        "annotations": { HOLDER_ANNOTATION: null }}});
    match client.patch(leases(), NODE_LEASE_NAMESPACE, name, PatchType::Merge, &patch, false).await
    {
        Ok(_) | Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// The owner reference to node `name`, once it is registered (none while it is not there).
async fn node_owner(client: &dyn ApiClient, name: &str) -> Result<Option<Value>, ApiError> {
    let node = match client.get(resources::core("nodes"), "", name).await {
        Ok(node) => node,
        Err(ApiError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let uid = json::at(&node, "/metadata/uid").and_then(Value::as_str);
    Ok(uid.map(|uid| json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid})))
}

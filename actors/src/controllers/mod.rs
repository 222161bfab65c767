//! Controllers: actors that drive cluster state toward what objects declare, reading and writing
//! only through the [`ApiClient`](crate::client::ApiClient).
//!
//! - [`cluster_role_aggregation`]: gives aggregating ClusterRoles the rules they select.
//! - [`disruption`]: works out what each PodDisruptionBudget allows, for evictions.
//! - [`endpoints`]: lists the pods each Service selects in its Endpoints and EndpointSlices.
//! - [`event_ttl`]: deletes Events an hour (`--event-ttl`) after their last write.
//! - [`every_namespace`]: gives every namespace its `default` ServiceAccount and, with the
//!   secure port on, its `kube-root-ca.crt` ConfigMap.
//! - [`garbage_collector`]: deletes the dependents of deleted owners (ownerReferences), orphans
//!   or deletes them first as `propagationPolicy` asks.
//! - [`kubernetes_service`]: keeps the `kubernetes` Service that leads pods to the API server.
//! - [`namespace`]: empties a deleted namespace, then lets it go.
//! - [`node_ipam`]: gives each node a /24 of the cluster's pod network.
//! - [`node_lifecycle`]: takes nodes whose agent went silent as not Ready, and taints them.
//! - [`persistent_volume`]: binds claims to volumes, and follows both through their lives.
//! - [`pod_gc`]: deletes the pods of nodes gone, and the oldest finished pods past a threshold.
//! - [`replication`]: keeps each ReplicationController's replicas of its pod template.
//! - [`resource_quota`]: works out each ResourceQuota's hard limits and usage.
//! - [`service`]: the built-in load balancer of LoadBalancer services.
//! - [`service_account_tokens`]: fills service account token Secrets with their account's
//!   token, and deletes those of accounts gone.
//! - [`system_namespaces`]: creates a deleted system namespace (`kube-node-lease`) again.
//! - [`storage_protection`]: keeps claims used by pods, and bound volumes, from going.
//! - [`taint_eviction`]: evicts pods from nodes with NoExecute taints they do not tolerate.

pub mod cluster_role_aggregation;
pub mod disruption;
mod endpoint_slices;
pub mod endpoints;
pub mod event_ttl;
pub mod every_namespace;
pub mod garbage_collector;
pub mod kubernetes_service;
pub mod namespace;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod persistent_volume;
pub mod pod_gc;
pub mod replication;
pub mod resource_quota;
pub mod service;
pub mod service_account_tokens;
pub mod storage_protection;
pub mod system_namespaces;
pub mod taint_eviction;
mod trigger_time;

pub use cluster_role_aggregation::{ClusterRoleAggregator, StopClusterRoleAggregator};
pub use disruption::{DisruptionController, StopDisruptionController};
pub use endpoints::{EndpointsController, StopEndpointsController};
pub use event_ttl::{EventTtl, StopEventTtl};
pub use every_namespace::{EveryNamespace, Kept, StopEveryNamespace, ROOT_CA_CONFIG_MAP};
pub use garbage_collector::{GarbageCollector, StopCollector};
pub use kubernetes_service::{
    KubernetesServiceConfig, KubernetesServiceController, StopKubernetesServiceController,
};
pub use namespace::{NamespaceController, StopNamespaceController};
pub use node_ipam::{NodeIpamController, StopNodeIpamController};
pub use node_lifecycle::{NodeLifecycleController, StopNodeLifecycleController};
pub use persistent_volume::{PersistentVolumeController, StopPersistentVolumeController};
pub use pod_gc::{PodGarbageCollector, StopPodGarbageCollector};
pub use replication::{ReplicationManager, StopReplicationManager};
pub use resource_quota::{ResourceQuotaController, StopQuotaController};
pub use service::{ServiceController, StopServiceController};
pub use service_account_tokens::{StopTokensController, TokenSigner, TokensController};
pub use storage_protection::{StopStorageProtector, StorageProtector};
pub use system_namespaces::{StopSystemNamespaces, SystemNamespaces};
pub use taint_eviction::{StopTaintEvictionController, TaintEvictionController};

// What the controller manager's health is made of (`componentstatuses`).
crate::health::answers_ping!(
    ClusterRoleAggregator,
    DisruptionController,
    EndpointsController,
    EveryNamespace,
    GarbageCollector,
    NamespaceController,
    NodeIpamController,
    NodeLifecycleController,
    PersistentVolumeController,
    PodGarbageCollector,
    ReplicationManager,
    ResourceQuotaController,
    ServiceController,
    StorageProtector,
    TaintEvictionController,
    TokensController,
);

/// Whether every label an equality-based `selector` (a ReplicationController's, a Service's)
/// names has its value in `labels`.
pub(crate) fn selects(
    selector: &serde_json::Map<String, serde_json::Value>,
    labels: Option<&serde_json::Map<String, serde_json::Value>>,
) -> bool {
    selector.iter().all(|(key, value)| labels.and_then(|l| l.get(key)) == Some(value))
}

/// Counts one more failure in a row of `key`'s work; returns how long to wait before trying it
/// again ([`retry_delay`]).
pub(crate) fn back_off<K: Eq + std::hash::Hash + Clone>(
    retries: &mut std::collections::HashMap<K, u32>,
    key: &K,
) -> std::time::Duration {
    let failed = retries.entry(key.clone()).or_insert(0);
    *failed += 1;
    retry_delay(*failed)
}

/// How long a controller waits before trying again after `failed` attempts in a row failed:
/// from a tenth of a second, doubling, to a minute (Kubernetes' work queues back off so too).
pub(crate) fn retry_delay(failed: u32) -> std::time::Duration {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(100);
    const LONGEST: std::time::Duration = std::time::Duration::from_secs(60);
    FIRST.saturating_mul(1 << failed.saturating_sub(1).min(16)).min(LONGEST)
}

#[cfg(test)]
mod tests {
    #[test]
    fn retries_back_off_from_a_tenth_of_a_second_to_a_minute() {
        let delays = [1, 2, 3, 10, 11, 40].map(|n| super::retry_delay(n).as_millis());
        assert_eq!(delays, [100, 200, 400, 51_200, 60_000, 60_000]);
    }
}

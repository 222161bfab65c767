//! Controllers: actors that drive cluster state toward what objects declare, reading and writing
//! only through the [`ApiClient`](crate::client::ApiClient).
//!
//! - [`endpoints`]: lists the pods each Service selects in its Endpoints.
//! - [`garbage_collector`]: deletes the dependents of deleted owners (ownerReferences), orphans
//!   or deletes them first as `propagationPolicy` asks.
//! - [`namespace`]: empties a deleted namespace, then lets it go.
//! - [`replication`]: keeps each ReplicationController's replicas of its pod template.
//! - [`resource_quota`]: works out each ResourceQuota's hard limits and usage.
//! - [`service_account`]: gives every namespace its `default` ServiceAccount.

pub mod endpoints;
pub mod garbage_collector;
pub mod namespace;
pub mod replication;
pub mod resource_quota;
pub mod service_account;

pub use endpoints::{EndpointsController, StopEndpointsController};
pub use garbage_collector::{GarbageCollector, StopCollector};
pub use namespace::{NamespaceController, StopNamespaceController};
pub use replication::{ReplicationManager, StopReplicationManager};
pub use resource_quota::{ResourceQuotaController, StopQuotaController};
pub use service_account::{ServiceAccountController, StopServiceAccountController};

//! Controllers: actors that drive cluster state toward what objects declare, reading and writing
//! only through the [`ApiClient`](crate::client::ApiClient).
//!
//! - [`garbage_collector`]: deletes the dependents of deleted owners (ownerReferences), orphans
//!   or deletes them first as `propagationPolicy` asks.
//! - [`namespace`]: empties a deleted namespace, then lets it go.

pub mod garbage_collector;
pub mod namespace;

pub use garbage_collector::{GarbageCollector, StopCollector};
pub use namespace::{NamespaceController, StopNamespaceController};

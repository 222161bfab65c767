//! kplane's engine: the actors and the model behind the API, with no HTTP types.
//!
//! # Layout
//! - [`model`]: served resource types, stored objects, selectors, validation.
//! - [`store`]: store shard actors over RocksDB and the [`store::Store`] handle that routes to
//!   them; group commit, the cluster revision counter.
//! - [`watch`]: the watch hub actor, its event window and subscriptions.
//! - [`core`]: the API core: Kubernetes verb semantics over the store and the hub.
//! - [`client`]: the `ApiClient` trait components use, and its in-process implementation.
//! - [`forwarding`]: service traffic: listeners that forward to a service's endpoints.
//! - [`metrics`]: the resource metrics of nodes and pods (`kubectl top`), read from agents.
//! - [`health`]: the `Ping` long-lived actors answer, to tell a working one from a stopped one.
//! - [`threads`]: the names of the threads long-lived actors have to themselves.
//! - [`machine`]: this machine's host name.

pub mod agent;
pub mod client;
pub mod controllers;
pub mod core;
pub mod forwarding;
pub mod health;
pub mod machine;
pub mod metrics;
pub mod model;
pub mod scheduler;
pub mod store;
#[cfg(test)]
mod testing;
pub mod threads;
pub mod watch;

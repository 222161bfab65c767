//! The scheduler: filters and scores nodes for pending pods and binds each pod to the best one.
//!
//! - [`node_info`]: what the scheduler knows of a node and the pods on it, kept incrementally.
//! - [`filters`]: whether a pod fits a node, and why not (pure functions).
//! - [`scores`]: how well a pod fits each feasible node (pure functions).
//! - [`pod_affinity`], [`topology_spread`]: the filters and scores that count pods across
//!   the cluster (inter-pod affinity, topology spread constraints).
//! - [`preemption`]: which lower-priority pods make room for a pod that fits nowhere.
//! - [`queue`]: the scheduling queue (active, back-off, unschedulable).
//! - [`Scheduler`]: the actor tying them to list-watch caches and the binding API.

pub mod filters;
pub mod node_info;
pub mod pod_affinity;
pub mod preemption;
pub mod queue;
mod scheduler_actor;
pub mod scores;
pub mod topology_spread;

pub use scheduler_actor::{GetStats, Scheduler, SchedulerConfig, SchedulerStats, StopScheduler};

// Its health (`componentstatuses`).
crate::health::answers_ping!(Scheduler);

#[cfg(test)]
mod scheduler_tests;

//! The scheduler: filters and scores nodes for pending pods and binds each pod to the best one.

pub mod filters;
pub mod node_info;
pub mod scores;

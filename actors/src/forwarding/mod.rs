//! Service traffic on this machine: TCP listeners that hand each connection to one of a service
//! port's ready endpoints, round robin, as kube-proxy's userspace mode did. The node agent's
//! service proxy listens with them on cluster IPs and node ports, the service controller's load
//! balancer on its ingress IPs.
//!
//! - [`forwarder`]: one listener, and the connections it forwards.
//! - [`listeners`]: the listeners an actor wants, bound (and bound again after a failure) to
//!   match.
//! - [`service_table`]: the Services and Endpoints an actor follows, and each port's backends.
//! - [`health_check`]: the health check node ports of load balancers that keep traffic local.

pub mod forwarder;
pub mod health_check;
pub mod listeners;
pub mod service_table;

pub use forwarder::{Backends, Forwarder, Targets};
pub use health_check::HealthChecks;
pub use listeners::{BindFailure, Listeners};
pub use service_table::{ServicePort, ServiceTable};

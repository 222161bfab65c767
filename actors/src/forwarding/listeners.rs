//! The forwarding listeners one actor keeps, by the service that wants them: each service's
//! set is replaced whole, so that what it no longer wants is closed, what it still wants keeps
//! its socket (and only its backends change), and what is new is bound. An address that cannot
//! be bound (taken, or a port below 1024 without the privilege) is kept as wanted and tried
//! again by [`Listeners::retry`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use super::{Backends, Forwarder, Targets};
use crate::client::cache::Key;

/// A listener that could not be bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindFailure {
    pub service: Key,
    pub addr: SocketAddr,
    pub error: String,
}

struct Wanted {
    service: Key,
    backends: Backends,
    /// The error binding gave, while the address could not be bound.
    forwarder: Result<Forwarder, String>,
}

/// The listeners wanted, bound or not.
#[derive(Default)]
pub struct Listeners {
    wanted: BTreeMap<SocketAddr, Wanted>,
    by_service: BTreeMap<Key, BTreeSet<SocketAddr>>,
}

impl Listeners {
    /// Makes `service`'s listeners exactly `desired` (each address with the backends it
    /// forwards to). Returns the addresses it could not bind this time (not those that failed
    /// before and still fail).
    pub fn set(&mut self, service: &Key, desired: Vec<(SocketAddr, Targets)>) -> Vec<BindFailure> {
        let now: BTreeSet<SocketAddr> = desired.iter().map(|(addr, _)| *addr).collect();
        for gone in self.by_service.remove(service).unwrap_or_default().difference(&now) {
            self.wanted.remove(gone);
        }
        let mut failures = Vec::new();
        for (addr, backends) in desired {
            match self.wanted.get_mut(&addr) {
                Some(wanted) => {
                    // Another service's until now (its address was handed on): the socket
                    // stays bound and changes hands.
                    if wanted.service != *service {
                        if let Some(held) = self.by_service.get_mut(&wanted.service) {
                            held.remove(&addr);
                        }
                        wanted.service = service.clone();
                    }
                    wanted.backends.set(backends);
                }
                None => {
                    let backends = Backends::new(backends);
                    let forwarder =
                        Forwarder::bind(addr, backends.clone()).map_err(|e| e.to_string());
                    if let Err(error) = &forwarder {
                        failures.push(BindFailure {
                            service: service.clone(),
                            addr,
                            error: error.clone(),
                        });
                    }
                    self.wanted
                        .insert(addr, Wanted { service: service.clone(), backends, forwarder });
                }
            }
        }
        if !now.is_empty() {
            self.by_service.insert(service.clone(), now);
        }
        failures
    }

    /// Binds again what could not be bound; returns the services all of whose listeners are
    /// bound now that were not before.
    pub fn retry(&mut self) -> BTreeSet<Key> {
        let mut completed = BTreeSet::new();
        for (addr, wanted) in &mut self.wanted {
            if wanted.forwarder.is_ok() {
                continue;
            }
            wanted.forwarder =
                Forwarder::bind(*addr, wanted.backends.clone()).map_err(|e| e.to_string());
            if wanted.forwarder.is_ok() {
                completed.insert(wanted.service.clone());
            }
        }
        completed.retain(|service| self.all_bound(service));
        completed
    }

    /// Whether every listener `service` wants is bound.
    pub fn all_bound(&self, service: &Key) -> bool {
        self.by_service
            .get(service)
            .into_iter()
            .flatten()
            .all(|addr| self.wanted.get(addr).is_some_and(|w| w.forwarder.is_ok()))
    }

    /// The addresses `service` listens on now.
    pub fn bound(&self, service: &Key) -> Vec<SocketAddr> {
        self.by_service
            .get(service)
            .into_iter()
            .flatten()
            .filter(|addr| self.wanted.get(addr).is_some_and(|w| w.forwarder.is_ok()))
            .copied()
            .collect()
    }

    /// Closes every listener.
    pub fn clear(&mut self) {
        self.wanted.clear();
        self.by_service.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        ("default".into(), name.into())
    }

    #[tokio::test]
    async fn a_services_set_is_replaced_whole_and_failed_binds_are_retried() {
        let mut listeners = Listeners::default();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = taken.local_addr().unwrap();
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let backend: SocketAddr = "127.0.0.1:1".parse().unwrap();

        let failures = listeners.set(&key("a"), vec![(free, to(&[backend])), (busy, to(&[]))]);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].addr, busy);
        assert_eq!(listeners.bound(&key("a")), vec![free]);
        assert!(!listeners.all_bound(&key("a")));
        // Setting the same again reports nothing new, and keeps the bound socket.
        assert!(listeners.set(&key("a"), vec![(free, to(&[])), (busy, to(&[]))]).is_empty());
        assert!(listeners.retry().is_empty());

        drop(taken);
        assert_eq!(listeners.retry(), BTreeSet::from([key("a")]));
        assert!(listeners.all_bound(&key("a")));

        // An address handed to another service, and back, keeps its socket.
        assert!(listeners.set(&key("b"), vec![(free, to(&[backend]))]).is_empty());
        assert_eq!(
            (listeners.bound(&key("a")), listeners.bound(&key("b"))),
            (vec![busy], vec![free])
        );
        assert!(listeners.set(&key("a"), vec![(free, to(&[])), (busy, to(&[]))]).is_empty());
        assert!(listeners.bound(&key("b")).is_empty() && listeners.all_bound(&key("a")));

        // What the service no longer wants is closed (once the runtime has dropped its task):
        // its address can be bound again.
        listeners.set(&key("a"), vec![(free, to(&[]))]);
        until_bindable(busy).await;
        listeners.set(&key("a"), vec![]);
        assert!(listeners.bound(&key("a")).is_empty());
        until_bindable(free).await;
    }

    fn to(addrs: &[SocketAddr]) -> Targets {
        addrs.to_vec().into()
    }

    async fn until_bindable(addr: SocketAddr) {
        let bound = async {
            while std::net::TcpListener::bind(addr).is_err() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), bound).await.expect("closed");
    }
}

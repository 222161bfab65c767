//! The node's sysctl allowlist, as the kubelet's: a pod may set the safe sysctls, and the
//! unsafe ones its node allows (`agent.allowed_unsafe_sysctls`, the kubelet's
//! `--allowed-unsafe-sysctls`); any other is refused at admission (`SysctlForbidden`), as are
//! `net.*` sysctls with the host's network and IPC ones with the host's IPC. Containers run as
//! processes of this machine, so an admitted sysctl is not applied: the kernel's settings are
//! the machine's.

use serde_json::Value;

use super::admission::Rejection;
use crate::model::sysctl::{normalized, Namespace, SAFE};

/// What a node lets its pods set.
#[derive(Debug, Clone)]
pub struct SysctlAllowlist {
    names: Vec<(String, Namespace)>,
    /// Patterns ending in `*`, without it.
    prefixes: Vec<(String, Namespace)>,
}

impl Default for SysctlAllowlist {
    /// The safe sysctls alone.
    fn default() -> Self {
        Self::new("").expect("the safe sysctls are namespaced")
    }
}

impl SysctlAllowlist {
    /// The safe sysctls and the unsafe ones `allowed` lists, comma-separated, each a name or
    /// a prefix ending in `*` (`kernel.msg*,net.core.somaxconn`). Only namespaced sysctls can
    /// be allowed: a node-wide one would let one pod change every pod's machine.
    pub fn new(allowed: &str) -> Result<Self, String> {
        let mut list = Self { names: Vec::new(), prefixes: Vec::new() };
        // Every entry of a list counts: an empty one (`a,,b`) is refused, as the kubelet does.
        let listed = !allowed.trim().is_empty();
        let unsafe_ones = allowed.split(',').map(str::trim).filter(|_| listed);
        for entry in SAFE.iter().copied().chain(unsafe_ones) {
            let entry = normalized(entry);
            let (name, pattern) = match entry.strip_suffix('*') {
                Some(prefix) => (prefix, true),
                None => (entry.as_str(), false),
            };
            let well_formed = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/".contains(&b));
            if !well_formed || name.contains('*') {
                return Err(format!("{entry:?} is not a sysctl name or a prefix ending in '*'"));
            }
            let Some(namespace) = Namespace::of(name) else {
                return Err(format!(
                    "{entry:?} is not known to be namespaced (only kernel.shm*, kernel.msg*, \
                     kernel.sem, fs.mqueue.* and net.* can be allowed)"
                ));
            };
            let into = if pattern { &mut list.prefixes } else { &mut list.names };
            into.push((name.to_string(), namespace));
        }
        Ok(list)
    }

    /// Whether the node admits `pod`'s sysctls: the first it does not is the reason.
    pub fn admit(&self, pod: &Value) -> Result<(), Rejection> {
        let spec = &pod["spec"];
        let sysctls = spec.pointer("/securityContext/sysctls").and_then(Value::as_array);
        let on_host = |field: &str| spec.get(field).and_then(Value::as_bool).unwrap_or(false);
        let (host_network, host_ipc) = (on_host("hostNetwork"), on_host("hostIPC"));
        for sysctl in sysctls.into_iter().flatten() {
            let Some(name) = sysctl.get("name").and_then(Value::as_str) else { continue };
            let name = normalized(name);
            let why = match self.namespace_of(&name) {
                None => format!("{name:?} not allowlisted"),
                Some(ns)
                    if (ns == Namespace::Net && host_network)
                        || (ns == Namespace::Ipc && host_ipc) =>
                {
                    format!("{name:?} not allowed with host {} enabled", ns.host_word())
                }
                Some(_) => continue,
            };
            return Err(Rejection {
                reason: "SysctlForbidden".into(),
                message: format!("forbidden sysctl: {why}"),
            });
        }
        Ok(())
    }

    /// The namespace of an allowed sysctl; `None` when it is not allowed.
    fn namespace_of(&self, name: &str) -> Option<Namespace> {
        let named = self.names.iter().find(|(n, _)| n == name);
        let prefixed = || self.prefixes.iter().find(|(p, _)| name.starts_with(p.as_str()));
        named.or_else(prefixed).map(|(_, ns)| *ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(sysctls: &[&str], extra: Value) -> Value {
        let sysctls: Vec<Value> =
            sysctls.iter().map(|n| json!({"name": n, "value": "1"})).collect();
        let mut spec = json!({"securityContext": {"sysctls": sysctls}});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        json!({"spec": spec})
    }

    fn refusal(list: &SysctlAllowlist, pod: &Value) -> String {
        let rejection = list.admit(pod).expect_err("refused");
        assert_eq!(rejection.reason, "SysctlForbidden");
        rejection.message
    }

    #[test]
    fn safe_sysctls_are_admitted_and_unsafe_ones_refused_in_the_kubelet_s_words() {
        let safe = SysctlAllowlist::default();
        assert_eq!(safe.admit(&json!({"spec": {}})), Ok(()));
        let ok = pod(
            &["kernel.shm_rmid_forced", "net/ipv4/tcp_rmem", "net.ipv4.tcp_syncookies"],
            json!({}),
        );
        assert_eq!(safe.admit(&ok), Ok(()));
        assert_eq!(
            refusal(&safe, &pod(&["net.ipv4.ip_local_port_range", "kernel.msgmax"], json!({}))),
            "forbidden sysctl: \"kernel.msgmax\" not allowlisted"
        );
        assert_eq!(
            refusal(&safe, &pod(&["net.ipv4.tcp_syncookies"], json!({"hostNetwork": true}))),
            "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
        );
        assert_eq!(
            refusal(&safe, &pod(&["kernel.shm_rmid_forced"], json!({"hostIPC": true}))),
            "forbidden sysctl: \"kernel.shm_rmid_forced\" not allowed with host ipc enabled"
        );
    }

    #[test]
    fn a_node_may_allow_namespaced_unsafe_sysctls_by_name_or_prefix() {
        let list = SysctlAllowlist::new("kernel.msg*, net.core.somaxconn").unwrap();
        let allowed = pod(&["kernel.msgmax", "kernel/msgmnb", "net.core.somaxconn"], json!({}));
        assert_eq!(list.admit(&allowed), Ok(()));
        assert!(list.admit(&pod(&["net.core.rmem_max"], json!({}))).is_err());
        assert!(list.admit(&pod(&["kernel.sem"], json!({}))).is_err());
        // A `/`-written name: its dots are part of one part.
        assert_eq!(
            normalized("net/ipv4/conf/eno2.100/rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );

        for node_wide in ["vm.swappiness", "kernel.*", "fs.file-max"] {
            let error = SysctlAllowlist::new(node_wide).unwrap_err();
            assert!(error.contains("not known to be namespaced"), "{error}");
        }
        assert!(SysctlAllowlist::new("net.*.x").unwrap_err().contains("not a sysctl name"));
        assert!(SysctlAllowlist::new("kernel.sem,,net.core.somaxconn").is_err());
        assert!(SysctlAllowlist::new(" ").is_ok(), "nothing listed");
    }
}

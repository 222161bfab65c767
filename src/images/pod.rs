//! What a built-in image learns from its pod's environment: the name it answers with and the
//! address it binds. The node agent gives every pod its own 127.x.y.z address in `POD_IP`, so
//! several pods can use the same port on one machine.

use std::net::{IpAddr, Ipv4Addr};

use super::ImageError;

/// The pod as an image sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodEnv {
    /// `HOSTNAME`, else `POD_NAME`, else the machine's hostname: what `/hostname` answers.
    pub name: String,
    /// `POD_IP`, else 0.0.0.0: the address every server binds.
    pub ip: IpAddr,
}

impl PodEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ImageError> {
        Self::from_lookup(|key| std::env::var(key).ok(), machine_hostname)
    }

    /// Builds from a variable lookup; empty values count as unset.
    fn from_lookup(
        var: impl Fn(&str) -> Option<String>,
        machine_name: impl FnOnce() -> String,
    ) -> Result<Self, ImageError> {
        let set = |key: &str| var(key).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let name = set("HOSTNAME").or_else(|| set("POD_NAME")).unwrap_or_else(machine_name);
        let ip = match set("POD_IP") {
            Some(value) => value.parse().map_err(|_| ImageError::PodIp { value })?,
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        Ok(PodEnv { name, ip })
    }
}

/// The kernel's hostname; "localhost" if even that cannot be read.
fn machine_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<PodEnv, ImageError> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        PodEnv::from_lookup(
            |key| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
            || "machine".to_owned(),
        )
    }

    #[test]
    fn name_prefers_hostname_then_pod_name_then_machine() {
        let both = env(&[("HOSTNAME", "h"), ("POD_NAME", "p")]).unwrap();
        assert_eq!(both.name, "h");
        assert_eq!(env(&[("HOSTNAME", ""), ("POD_NAME", "p")]).unwrap().name, "p");
        assert_eq!(env(&[]).unwrap().name, "machine");
    }

    #[test]
    fn ip_defaults_to_any_and_rejects_garbage() {
        assert_eq!(env(&[]).unwrap().ip, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(
            env(&[("POD_IP", "127.0.3.4")]).unwrap().ip,
            IpAddr::V4(Ipv4Addr::new(127, 0, 3, 4))
        );
        let garbage = env(&[("POD_IP", "nope")]);
        assert!(matches!(garbage, Err(ImageError::PodIp { value }) if value == "nope"));
    }

    #[test]
    fn machine_hostname_is_never_empty() {
        assert!(!machine_hostname().is_empty());
    }
}

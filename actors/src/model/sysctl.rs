//! Sysctl names as Kubernetes reads them: written with `.` or `/` between their parts, and
//! the kernel namespace each belongs to (which decides whether a pod may set it: the API
//! refuses one of a namespace the pod shares with the host, the kubelet one it does not allow).

/// The sysctls Kubernetes 1.32 counts as safe: namespaced, and isolated between pods (what
/// the kubelet lets any pod set, and the baseline Pod Security Standard allows).
pub const SAFE: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The kernel namespace a sysctl belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    /// Of a sysctl name (or a pattern's prefix); `None`: not namespaced, a node-wide setting.
    pub fn of(name: &str) -> Option<Self> {
        if name == "kernel.sem"
            || ["kernel.shm", "kernel.msg", "fs.mqueue."].iter().any(|p| name.starts_with(p))
        {
            Some(Self::Ipc)
        } else if name.starts_with("net.") {
            Some(Self::Net)
        } else {
            None
        }
    }

    /// The host's namespace of this kind, as the kubelet names it (`host net`).
    pub fn host_word(self) -> &'static str {
        match self {
            Self::Ipc => "ipc",
            Self::Net => "net",
        }
    }
}

/// A sysctl name with `.` between its parts, whichever separator it was written with (the
/// first one says which: `net/ipv4/ip_forward` is `net.ipv4.ip_forward`, and a `.` inside a
/// part of a `/`-written name becomes `/`).
pub fn normalized(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_and_placed_in_their_namespace() {
        assert_eq!(normalized("net/ipv4/tcp_rmem"), "net.ipv4.tcp_rmem");
        assert_eq!(normalized("kernel.shm_rmid_forced"), "kernel.shm_rmid_forced");
        assert_eq!(Namespace::of("kernel.msgmax"), Some(Namespace::Ipc));
        assert_eq!(Namespace::of("kernel.sem"), Some(Namespace::Ipc));
        assert_eq!(Namespace::of("net.core.somaxconn"), Some(Namespace::Net));
        assert_eq!(Namespace::of("vm.swappiness"), None);
    }
}

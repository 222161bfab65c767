//! What this machine is called: its host name, as reporters, nodes, certificates and pods on
//! the host's network name it.

use std::sync::LazyLock;

/// This machine's host name (`localhost` when it has none), read once.
pub fn host_name() -> &'static str {
    static NAME: LazyLock<String> = LazyLock::new(|| {
        let name = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok());
        name.filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".into())
    });
    &NAME
}

//! The finalizers Kubernetes itself names: every kind takes these without a prefix.

/// The entry of a namespace's `spec.finalizers` that its controller removes once the
/// namespace is empty.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";
/// The finalizer an Orphan deletion leaves for the garbage collector.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer a Foreground deletion leaves for the garbage collector.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// All of them (Kubernetes' standard finalizer names).
pub const STANDARD_FINALIZERS: [&str; 3] =
    [NAMESPACE_FINALIZER, ORPHAN_FINALIZER, FOREGROUND_FINALIZER];

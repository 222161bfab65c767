//! The cluster-wide revision counter that every committed write draws its resourceVersion from.

use std::sync::atomic::{AtomicU64, Ordering};

/// Strictly increasing, never reused: shards persist the highest value they used with each
/// batch, and start-up resumes above the highest value any shard persisted. A revision handed
/// out to a write that never reaches disk (a crash, a failed commit) is taken again after a
/// restart, so only durable ones may name a state to clients (a list's resourceVersion, which
/// a watch resumes from).
#[derive(Debug, Default)]
pub struct Revision {
    handed_out: AtomicU64,
    durable: AtomicU64,
}

impl Revision {
    pub fn starting_after(last: u64) -> Self {
        Self { handed_out: AtomicU64::new(last), durable: AtomicU64::new(last) }
    }

    /// Takes the next revision.
    pub fn next(&self) -> u64 {
        self.handed_out.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The last revision handed out.
    pub fn current(&self) -> u64 {
        self.handed_out.load(Ordering::SeqCst)
    }

    /// Notes that a commit holding `revision` is on disk.
    pub fn made_durable(&self, revision: u64) {
        self.durable.fetch_max(revision, Ordering::SeqCst);
    }

    /// The highest revision a commit has put on disk: a restart resumes above it.
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictly_increasing() {
        let r = Revision::starting_after(10);
        assert_eq!(r.next(), 11);
        assert_eq!(r.next(), 12);
        assert_eq!(r.current(), 12);
        assert_eq!(r.durable(), 10, "nothing committed yet");
        r.made_durable(12);
        r.made_durable(11);
        assert_eq!(r.durable(), 12);
    }
}

//! The cluster-wide revision counter that every committed write draws its resourceVersion from.

use std::sync::atomic::{AtomicU64, Ordering};

/// Strictly increasing, never reused: shards persist the highest value they used with each
/// batch, and start-up resumes above the highest value any shard persisted.
#[derive(Debug, Default)]
pub struct Revision(AtomicU64);

impl Revision {
    pub fn starting_after(last: u64) -> Self {
        Self(AtomicU64::new(last))
    }

    /// Takes the next revision.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The last revision handed out.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
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
    }
}

//! A shard's recent history: what each committed change replaced, so that a list can be
//! served at an exact past revision (`resourceVersionMatch=Exact`, or a `resourceVersion` with
//! a `limit`, as etcd serves them until it compacts): the state at a revision is the current
//! one with every later change undone. Bounded as the watch hub's window is, by changes and by
//! bytes; older revisions are gone (410 Expired), as they are from a compacted etcd.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::model::{ResourceType, StoredObject};

/// The bounds of a history by default: those of the watch hub's window.
pub(crate) const DEFAULT_CHANGES: usize = 100_000;
pub(crate) const DEFAULT_BYTES: usize = 512 << 20;

/// One committed change: the object it wrote (or, for a delete, the object deleted) and the
/// state it replaced (`None` for a create).
struct Change {
    written: Arc<StoredObject>,
    replaced: Option<Arc<StoredObject>>,
}

/// What undoing a change does to its collection.
pub(crate) enum Undo<'a> {
    /// Put this object back (the state a change or a delete replaced).
    Restore(&'a Arc<StoredObject>),
    /// Take this object out (a create).
    Remove(&'a StoredObject),
}

pub(crate) struct History {
    changes: VecDeque<Change>,
    bytes: usize,
    max_changes: usize,
    max_bytes: usize,
    /// Every change after this revision is kept.
    complete_after: u64,
}

impl History {
    /// An empty history of a shard whose state is the state at `revision` (its load).
    pub(crate) fn new(revision: u64, max_changes: usize, max_bytes: usize) -> Self {
        Self {
            changes: VecDeque::new(),
            bytes: 0,
            max_changes,
            max_bytes,
            complete_after: revision,
        }
    }

    /// Records a committed change (in commit order), forgetting the oldest past the bounds.
    pub(crate) fn record(
        &mut self,
        written: &Arc<StoredObject>,
        replaced: Option<&Arc<StoredObject>>,
    ) {
        let change = Change { written: written.clone(), replaced: replaced.cloned() };
        self.bytes += size(&change);
        self.changes.push_back(change);
        while self.changes.len() > self.max_changes || self.bytes > self.max_bytes {
            let Some(oldest) = self.changes.pop_front() else { break };
            self.bytes -= size(&oldest);
            self.complete_after = oldest.written.resource_version;
        }
    }

    /// The undoing, newest first, of every change to `resource` after `revision`; `None` when
    /// some of them are no longer kept.
    pub(crate) fn undo_after(
        &self,
        resource: &'static ResourceType,
        revision: u64,
    ) -> Option<impl Iterator<Item = Undo<'_>>> {
        (revision >= self.complete_after).then(|| {
            let later = self
                .changes
                .iter()
                .rev()
                .take_while(move |c| c.written.resource_version > revision);
            later.filter(move |c| std::ptr::eq(c.written.key.resource, resource)).map(|c| match &c
                .replaced
            {
                Some(replaced) => Undo::Restore(replaced),
                None => Undo::Remove(&c.written),
            })
        })
    }
}

fn size(change: &Change) -> usize {
    change.written.raw.len() + change.replaced.as_ref().map_or(0, |r| r.raw.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::resources::find;
    use crate::model::{ObjectKey, PreparedObject};

    fn object(plural: &str, name: &str, rv: u64) -> Arc<StoredObject> {
        let key = ObjectKey::new(find("", "v1", plural).unwrap(), "ns", name);
        Arc::new(PreparedObject::new(key, json!({"metadata": {"name": name}})).at_revision(rv))
    }

    fn undone(history: &History, revision: u64) -> Option<Vec<String>> {
        let pods = find("", "v1", "pods").unwrap();
        let undo = history.undo_after(pods, revision)?;
        Some(
            undo.map(|u| match u {
                Undo::Restore(o) => format!("restore {}@{}", o.key.name, o.resource_version),
                Undo::Remove(o) => format!("remove {}", o.key.name),
            })
            .collect(),
        )
    }

    #[test]
    fn later_changes_of_the_resource_are_undone_newest_first() {
        let mut history = History::new(10, 100, usize::MAX);
        let a11 = object("pods", "a", 11);
        history.record(&a11, None);
        history.record(&object("configmaps", "c", 12), None);
        let a13 = object("pods", "a", 13);
        history.record(&a13, Some(&a11));
        history.record(&object("pods", "a", 14), Some(&a13));
        assert_eq!(undone(&history, 14).unwrap(), Vec::<String>::new());
        assert_eq!(undone(&history, 12).unwrap(), ["restore a@13", "restore a@11"]);
        assert_eq!(undone(&history, 10).unwrap(), ["restore a@13", "restore a@11", "remove a"]);
        assert!(undone(&history, 9).is_none(), "before the load: unknown");
    }

    #[test]
    fn the_oldest_changes_go_past_the_bounds() {
        let mut history = History::new(0, 2, usize::MAX);
        for rv in 1..=3 {
            history.record(&object("pods", &format!("p{rv}"), rv), None);
        }
        assert!(undone(&history, 0).is_none());
        assert_eq!(undone(&history, 1).unwrap(), ["remove p3", "remove p2"]);
        let size = object("pods", "p1", 1).raw.len();
        let mut history = History::new(0, 100, size * 2);
        for rv in 1..=3 {
            history.record(&object("pods", &format!("p{rv}"), rv), None);
        }
        assert!(undone(&history, 0).is_none(), "bounded by bytes too");
        assert!(undone(&history, 1).is_some());
    }
}

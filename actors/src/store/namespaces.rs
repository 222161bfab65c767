//! The committed namespaces and whether each is terminating: one of the admission tables
//! (`tables.rs`), which a create checks its namespace in, as Kubernetes' namespace admission
//! reads a local cache instead of asking storage.

use std::sync::RwLock;

use crate::model::{FastMap, ResourceType, StoredObject};

/// What a create may do in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceState {
    Active,
    /// Marked for deletion: it takes no new objects.
    Terminating,
}

/// Namespace name to state, for every committed namespace.
#[derive(Debug, Default)]
pub(crate) struct NamespaceTable(RwLock<FastMap<String, NamespaceState>>);

impl NamespaceTable {
    /// Whether objects of `resource` are namespaces (the only ones the table follows).
    pub(crate) fn follows(resource: &ResourceType) -> bool {
        resource.group.is_empty() && resource.plural == "namespaces"
    }

    /// Records a committed namespace (`deleted`: it is gone).
    pub(crate) fn record(&self, namespace: &StoredObject, deleted: bool) {
        let mut table = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = &namespace.key.name;
        if deleted {
            table.remove(name);
        } else {
            let state = if namespace.deleting {
                NamespaceState::Terminating
            } else {
                NamespaceState::Active
            };
            table.insert(name.clone(), state);
        }
    }

    pub(crate) fn state(&self, name: &str) -> Option<NamespaceState> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{resources, ObjectKey};

    fn namespace(name: &str, deleting: bool) -> StoredObject {
        let namespaces = resources::find("", "v1", "namespaces").unwrap();
        let mut object = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":name}});
        if deleting {
            object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        StoredObject::from_value(ObjectKey::new(namespaces, "", name), object, 7)
    }

    #[test]
    fn follows_namespaces_through_their_life() {
        let table = NamespaceTable::default();
        assert_eq!(table.state("team"), None);
        table.record(&namespace("team", false), false);
        assert_eq!(table.state("team"), Some(NamespaceState::Active));
        table.record(&namespace("team", true), false);
        assert_eq!(table.state("team"), Some(NamespaceState::Terminating));
        table.record(&namespace("team", true), true);
        assert_eq!(table.state("team"), None);
    }

    #[test]
    fn only_core_namespaces_are_followed() {
        assert!(NamespaceTable::follows(resources::find("", "v1", "namespaces").unwrap()));
        assert!(!NamespaceTable::follows(resources::find("", "v1", "pods").unwrap()));
    }
}

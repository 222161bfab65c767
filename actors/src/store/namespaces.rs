//! The committed namespaces, whether each is terminating, and the pod security labels of
//! those that have some: one of the admission tables (`tables.rs`), which a create checks its
//! namespace in, as Kubernetes' namespace and PodSecurity admission read a local cache
//! instead of asking storage.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

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
pub(crate) struct NamespaceTable {
    states: RwLock<FastMap<String, NamespaceState>>,
    /// The `pod-security.kubernetes.io/` labels of the namespaces that have any.
    pod_security: RwLock<FastMap<String, Arc<Labels>>>,
}

/// Labels, by key.
pub type Labels = BTreeMap<String, String>;

/// The prefix of the labels that set a namespace's pod security levels.
const POD_SECURITY_PREFIX: &[u8] = b"pod-security.kubernetes.io/";

impl NamespaceTable {
    /// Whether objects of `resource` are namespaces (the only ones the table follows).
    pub(crate) fn follows(resource: &ResourceType) -> bool {
        resource.group.is_empty() && resource.plural == "namespaces"
    }

    /// Records a committed namespace (`deleted`: it is gone).
    pub(crate) fn record(&self, namespace: &StoredObject, deleted: bool) {
        self.record_pod_security(namespace, deleted);
        let mut table = self.states.write().unwrap_or_else(std::sync::PoisonError::into_inner);
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
        self.states.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).copied()
    }

    /// The namespace's `pod-security.kubernetes.io/` labels; `None` when it has none.
    pub(crate) fn pod_security(&self, name: &str) -> Option<Arc<Labels>> {
        let table = self.pod_security.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        table.get(name).cloned()
    }

    fn record_pod_security(&self, namespace: &StoredObject, deleted: bool) {
        // Most namespaces have none: found in the stored bytes before any parse.
        let labelled =
            !deleted && memchr::memmem::find(&namespace.raw, POD_SECURITY_PREFIX).is_some();
        let labels: Option<Labels> = labelled.then(|| {
            let object = namespace.to_value();
            let labels = object.pointer("/metadata/labels").and_then(serde_json::Value::as_object);
            labels
                .into_iter()
                .flatten()
                .filter(|(key, _)| key.as_bytes().starts_with(POD_SECURITY_PREFIX))
                .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_string()))
                .collect()
        });
        let mut table =
            self.pod_security.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match labels.filter(|labels| !labels.is_empty()) {
            Some(labels) => table.insert(namespace.key.name.clone(), Arc::new(labels)),
            None => table.remove(&namespace.key.name),
        };
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
    fn keeps_the_pod_security_labels_of_namespaces_that_have_some() {
        let table = NamespaceTable::default();
        let mut labelled = namespace("strict", false);
        let mut object = labelled.to_value();
        object["metadata"]["labels"] =
            json!({"pod-security.kubernetes.io/enforce": "restricted", "team": "a"});
        labelled = StoredObject::from_value(labelled.key.clone(), object, 8);
        table.record(&labelled, false);
        table.record(&namespace("plain", false), false);
        let labels = table.pod_security("strict").expect("its labels");
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [(&"pod-security.kubernetes.io/enforce".to_string(), &"restricted".to_string())]
        );
        assert!(table.pod_security("plain").is_none());
        table.record(&namespace("strict", false), false);
        assert!(table.pod_security("strict").is_none(), "labels taken off");
        table.record(&labelled, false);
        table.record(&labelled, true);
        assert!(table.pod_security("strict").is_none(), "namespace gone");
    }

    #[test]
    fn only_core_namespaces_are_followed() {
        assert!(NamespaceTable::follows(resources::find("", "v1", "namespaces").unwrap()));
        assert!(!NamespaceTable::follows(resources::find("", "v1", "pods").unwrap()));
    }
}

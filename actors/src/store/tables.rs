//! What admission reads without sending a message: tables that the shard owning their objects
//! keeps as it loads and commits them, before it acknowledges the write, so that a write
//! right after another sees it. Kubernetes' admission plugins read such state from local
//! caches too, instead of asking storage on every request.

use std::sync::{Arc, PoisonError, RwLock};

use super::namespaces::{Labels, NamespaceState, NamespaceTable};
use super::service_accounts::{AccountRefs, ServiceAccountTable};
use crate::model::resources::SCHEDULING_GROUP;
use crate::model::{FastMap, ResourceType, StoredObject};

/// Every table admission reads.
#[derive(Debug)]
pub(crate) struct AdmissionTables {
    namespaces: NamespaceTable,
    service_accounts: ServiceAccountTable,
    limit_ranges: PerNamespace,
    quotas: PerNamespace,
    priority_classes: PerNamespace,
}

impl Default for AdmissionTables {
    fn default() -> Self {
        Self {
            namespaces: NamespaceTable::default(),
            service_accounts: ServiceAccountTable::default(),
            limit_ranges: PerNamespace::following("", "limitranges"),
            quotas: PerNamespace::following("", "resourcequotas"),
            priority_classes: PerNamespace::following(SCHEDULING_GROUP, "priorityclasses"),
        }
    }
}

impl AdmissionTables {
    /// Records a committed object (`deleted`: it is gone) in the table that follows its kind.
    pub(crate) fn record(&self, object: &Arc<StoredObject>, deleted: bool) {
        let resource = object.key.resource;
        if NamespaceTable::follows(resource) {
            self.namespaces.record(object, deleted);
        } else if ServiceAccountTable::follows(resource) {
            self.service_accounts.record(object, deleted);
        } else if self.limit_ranges.follows(resource) {
            self.limit_ranges.record(object, deleted);
        } else if self.quotas.follows(resource) {
            self.quotas.record(object, deleted);
        } else if self.priority_classes.follows(resource) {
            self.priority_classes.record(object, deleted);
        }
    }

    pub(crate) fn namespace(&self, name: &str) -> Option<NamespaceState> {
        self.namespaces.state(name)
    }

    pub(crate) fn pod_security_labels(&self, namespace: &str) -> Option<Arc<Labels>> {
        self.namespaces.pod_security(namespace)
    }

    pub(crate) fn service_account(&self, namespace: &str, name: &str) -> Option<Arc<AccountRefs>> {
        self.service_accounts.get(namespace, name)
    }

    pub(crate) fn limit_ranges(&self, namespace: &str) -> Vec<Arc<StoredObject>> {
        self.limit_ranges.in_namespace(namespace)
    }

    pub(crate) fn quotas(&self, namespace: &str) -> Vec<Arc<StoredObject>> {
        self.quotas.in_namespace(namespace)
    }

    /// Every PriorityClass (cluster-scoped: all under the namespace "").
    pub(crate) fn priority_classes(&self) -> Vec<Arc<StoredObject>> {
        self.priority_classes.in_namespace("")
    }
}

/// The committed objects of one kind (LimitRanges, ResourceQuotas, PriorityClasses) in each
/// namespace that has any (a cluster-scoped kind's under ""), by name.
#[derive(Debug)]
struct PerNamespace {
    group: &'static str,
    plural: &'static str,
    objects: RwLock<FastMap<String, Vec<Arc<StoredObject>>>>,
}

impl PerNamespace {
    fn following(group: &'static str, plural: &'static str) -> Self {
        Self { group, plural, objects: RwLock::default() }
    }

    fn follows(&self, resource: &ResourceType) -> bool {
        resource.group == self.group && resource.plural == self.plural
    }

    fn record(&self, object: &Arc<StoredObject>, deleted: bool) {
        let mut table = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        let key = &object.key;
        let objects = table.entry(key.namespace.clone()).or_default();
        objects.retain(|o| o.key.name != key.name);
        if !deleted {
            let at = objects.partition_point(|o| o.key.name < key.name);
            objects.insert(at, object.clone());
        }
        if objects.is_empty() {
            table.remove(&key.namespace);
        }
    }

    /// A namespace's objects, by name (none for most namespaces: one lookup).
    fn in_namespace(&self, namespace: &str) -> Vec<Arc<StoredObject>> {
        let table = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        table.get(namespace).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{resources, ObjectKey};

    fn range(namespace: &str, name: &str) -> Arc<StoredObject> {
        let ranges = resources::find("", "v1", "limitranges").unwrap();
        let object = json!({"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": name, "namespace": namespace}});
        Arc::new(StoredObject::from_value(ObjectKey::new(ranges, namespace, name), object, 3))
    }

    #[test]
    fn follows_each_namespaces_limit_ranges() {
        let tables = AdmissionTables::default();
        assert!(tables.limit_ranges("team").is_empty());
        tables.record(&range("team", "b"), false);
        tables.record(&range("team", "a"), false);
        tables.record(&range("team", "a"), false);
        tables.record(&range("other", "c"), false);
        let names = |ns: &str| -> Vec<String> {
            tables.limit_ranges(ns).iter().map(|r| r.key.name.clone()).collect()
        };
        assert_eq!(names("team"), ["a", "b"]);
        tables.record(&range("team", "a"), true);
        assert_eq!(names("team"), ["b"]);
        assert_eq!(names("other"), ["c"]);
        assert_eq!(tables.namespace("team"), None, "a limit range is not a namespace");
        assert!(tables.quotas("team").is_empty(), "nor a quota");
    }
}

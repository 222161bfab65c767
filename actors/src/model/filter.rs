//! Which objects a list or watch wants: a namespace, a label selector and a field selector.

use super::{FieldSelector, FieldValues, LabelSelector, Labels, ResourceType, StoredObject};

/// The object filter shared by lists (in the store) and watches (in the hub).
#[derive(Debug, Clone, Default)]
pub struct ObjectFilter {
    /// Only objects in this namespace; `None` for all namespaces (or cluster-scoped objects).
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl ObjectFilter {
    pub fn matches(&self, object: &StoredObject) -> bool {
        self.namespace.as_ref().is_none_or(|ns| *ns == object.key.namespace)
            && self.labels.matches(&object.labels)
            && self.fields.matches(&object.fields)
    }

    /// Whether an object that is worked out when read (never stored) matches.
    pub fn matches_value(
        &self,
        resource: &'static ResourceType,
        object: &serde_json::Value,
    ) -> bool {
        let namespace = object.pointer("/metadata/namespace").and_then(|n| n.as_str());
        self.namespace.as_deref().is_none_or(|ns| Some(ns) == namespace)
            && self.labels.matches(&Labels::of(object))
            && self.fields.matches(&FieldValues::extract(resource, object))
    }
}

//! Which objects a list or watch wants: a namespace, a label selector and a field selector.

use super::{FieldSelector, LabelSelector, StoredObject};

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
}

//! The committed ServiceAccounts of each namespace, reduced to what the ServiceAccount
//! admission plugin reads of them: one of the admission tables (`tables.rs`), as Kubernetes'
//! plugin reads its informer's cache instead of asking storage on every pod create.

use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;

use crate::model::{json, text, FastMap, ResourceType, StoredObject};

/// The annotation by which an account limits the secrets its pods may reference.
const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";

/// What a pod's admission needs of its ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountRefs {
    /// `imagePullSecrets`' names: a pod that names none gets these.
    pub image_pull_secrets: Vec<String>,
    /// `secrets`' names, when the account enforces them (annotation
    /// `kubernetes.io/enforce-mountable-secrets: "true"`): its pods may reference no others.
    pub mountable_secrets: Option<Vec<String>>,
    /// `automountServiceAccountToken`, when set: whether pods that say nothing get an API
    /// token volume.
    pub automount: Option<bool>,
}

impl AccountRefs {
    fn of(account: &Value) -> Self {
        let names = |field: &str| -> Vec<String> {
            let list = account.get(field).and_then(Value::as_array);
            let names = list.into_iter().flatten().filter_map(|r| r.get("name")?.as_str());
            names.map(str::to_string).collect()
        };
        let enforce = json::at(account, "/metadata/annotations")
            .and_then(|a| a.get(ENFORCE_MOUNTABLE_SECRETS))
            .and_then(Value::as_str)
            .is_some_and(text::go_true);
        Self {
            image_pull_secrets: names("imagePullSecrets"),
            mountable_secrets: enforce.then(|| names("secrets")),
            automount: account.get("automountServiceAccountToken").and_then(Value::as_bool),
        }
    }
}

/// Namespace, then account name, to what admission reads of the account.
#[derive(Debug, Default)]
pub(crate) struct ServiceAccountTable(RwLock<FastMap<String, FastMap<String, Arc<AccountRefs>>>>);

impl ServiceAccountTable {
    /// Whether objects of `resource` are service accounts (the only ones the table follows).
    pub(crate) fn follows(resource: &ResourceType) -> bool {
        resource.group.is_empty() && resource.plural == "serviceaccounts"
    }

    /// Records a committed account (`deleted`: it is gone).
    pub(crate) fn record(&self, account: &StoredObject, deleted: bool) {
        let refs = (!deleted).then(|| Arc::new(AccountRefs::of(&account.to_value())));
        let mut table = self.0.write().unwrap_or_else(PoisonError::into_inner);
        let key = &account.key;
        match refs {
            Some(refs) => {
                let accounts = table.entry(key.namespace.clone()).or_default();
                accounts.insert(key.name.clone(), refs);
            }
            None => {
                if let Some(accounts) = table.get_mut(&key.namespace) {
                    accounts.remove(&key.name);
                    if accounts.is_empty() {
                        table.remove(&key.namespace);
                    }
                }
            }
        }
    }

    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<Arc<AccountRefs>> {
        let table = self.0.read().unwrap_or_else(PoisonError::into_inner);
        table.get(namespace)?.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{resources, ObjectKey};

    fn account(namespace: &str, name: &str, body: Value) -> StoredObject {
        let accounts = resources::find("", "v1", "serviceaccounts").unwrap();
        let mut object = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace}});
        object.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
        StoredObject::from_value(ObjectKey::new(accounts, namespace, name), object, 7)
    }

    #[test]
    fn follows_each_namespaces_accounts_and_what_admission_reads_of_them() {
        let table = ServiceAccountTable::default();
        assert!(ServiceAccountTable::follows(
            resources::find("", "v1", "serviceaccounts").unwrap()
        ));
        assert!(!ServiceAccountTable::follows(resources::find("", "v1", "secrets").unwrap()));
        table.record(&account("team", "default", json!({})), false);
        table.record(
            &account(
                "team",
                "builder",
                json!({"imagePullSecrets": [{"name": "registry"}],
                "secrets": [{"name": "a"}]}),
            ),
            false,
        );
        let builder = table.get("team", "builder").unwrap();
        assert_eq!(builder.image_pull_secrets, ["registry"]);
        assert_eq!(builder.mountable_secrets, None, "not enforced without the annotation");
        assert_eq!(*table.get("team", "default").unwrap(), AccountRefs::default());
        assert!(table.get("other", "default").is_none());

        let enforcing = json!({"metadata": {"name": "builder", "namespace": "team",
            "annotations": {"kubernetes.io/enforce-mountable-secrets": "T"}},
            "secrets": [{"name": "a"}, {"name": "b"}]});
        table.record(&account("team", "builder", enforcing), false);
        let builder = table.get("team", "builder").unwrap();
        assert_eq!(builder.mountable_secrets.as_deref(), Some(&["a".into(), "b".into()][..]));

        table.record(&account("team", "builder", json!({})), true);
        table.record(&account("team", "default", json!({})), true);
        assert!(table.get("team", "builder").is_none() && table.get("team", "default").is_none());
        assert!(table.0.read().unwrap().is_empty(), "an emptied namespace leaves no entry");
    }
}

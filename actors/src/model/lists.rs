//! How the core types' lists merge, as their Go fields are tagged (`patchStrategy`,
//! `patchMergeKey`, `listType`, `listMapKeys`): one table that the strategic merge patch, the
//! managed-fields walk and the OpenAPI documents (whose `x-kubernetes-patch-*` extensions
//! `kubectl apply` computes its patches from) all read. A list not declared here is atomic:
//! one value, replaced whole.

/// A declared list field of a core type.
#[derive(Debug, PartialEq, Eq)]
pub struct ListField {
    pub field: &'static str,
    /// How a strategic merge patch merges it: `merge`, or `merge,retainKeys`.
    pub strategy: &'static str,
    /// The fields that identify an item (`listMapKeys`, the first being the `patchMergeKey`),
    /// in alphabetical order; empty for a set of plain values.
    pub keys: &'static [&'static str],
}

impl ListField {
    /// The field a strategic merge patch matches items on; `None` for a set of plain values.
    pub fn merge_key(&self) -> Option<&'static str> {
        self.keys.first().copied()
    }
}

/// A core type with declared lists.
#[derive(Debug)]
pub struct DeclaringType {
    /// Its OpenAPI schema name.
    pub schema: &'static str,
    /// The names it is found under in the served objects (the last element of its path;
    /// `""` is the object itself).
    under: &'static [&'static str],
    pub lists: &'static [ListField],
}

const fn merged(field: &'static str, keys: &'static [&'static str]) -> ListField {
    ListField { field, strategy: "merge", keys }
}

const fn retained(field: &'static str, keys: &'static [&'static str]) -> ListField {
    ListField { field, strategy: "merge,retainKeys", keys }
}

const CONTAINER_LISTS: &[ListField] = &[
    merged("env", &["name"]),
    merged("ports", &["containerPort", "protocol"]),
    merged("volumeDevices", &["devicePath"]),
    merged("volumeMounts", &["mountPath"]),
];

const CONDITIONS: &[ListField] = &[merged("conditions", &["type"])];

const STATUS: &[&str] = &["status"];

const CONTAINERS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// The declaring types of the kinds served (k8s.io/api core/v1 and apimachinery's meta/v1).
pub const DECLARING_TYPES: &[DeclaringType] = &[
    DeclaringType {
        schema: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        under: &["metadata"],
        lists: &[merged("finalizers", &[]), merged("ownerReferences", &["uid"])],
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.PodSpec",
        under: &["spec"],
        lists: &[
            merged("containers", &["name"]),
            merged("ephemeralContainers", &["name"]),
            merged("hostAliases", &["ip"]),
            merged("imagePullSecrets", &["name"]),
            merged("initContainers", &["name"]),
            retained("resourceClaims", &["name"]),
            merged("schedulingGates", &["name"]),
            merged("topologySpreadConstraints", &["topologyKey", "whenUnsatisfiable"]),
            retained("volumes", &["name"]),
        ],
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.Container",
        under: CONTAINERS,
        lists: CONTAINER_LISTS,
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.EphemeralContainer",
        under: CONTAINERS,
        lists: CONTAINER_LISTS,
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.PodStatus",
        under: STATUS,
        lists: &[
            merged("conditions", &["type"]),
            merged("hostIPs", &["ip"]),
            merged("podIPs", &["ip"]),
            retained("resourceClaimStatuses", &["name"]),
        ],
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.ServiceSpec",
        under: &["spec"],
        lists: &[merged("ports", &["port", "protocol"])],
    },
    DeclaringType { schema: "io.k8s.api.core.v1.ServiceStatus", under: STATUS, lists: CONDITIONS },
    DeclaringType {
        schema: "io.k8s.api.core.v1.ServiceAccount",
        under: &[""],
        lists: &[merged("secrets", &["name"])],
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.NodeSpec",
        under: &["spec"],
        lists: &[merged("podCIDRs", &[])],
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.NodeStatus",
        under: STATUS,
        lists: &[merged("addresses", &["type"]), merged("conditions", &["type"])],
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.NamespaceStatus",
        under: STATUS,
        lists: CONDITIONS,
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        under: STATUS,
        lists: CONDITIONS,
    },
    DeclaringType {
        schema: "io.k8s.api.core.v1.ReplicationControllerStatus",
        under: STATUS,
        lists: CONDITIONS,
    },
];

/// The declared list `field` of the object at `parent` (a dotted path from the object's root,
/// `""` for the root itself, e.g. `.spec.template.spec`).
///
/// Types are told apart by where they sit, the last element of `parent`: no two types found
/// under the same name declare the same list differently (a Service's `.spec.ports` merge by
/// `port`, a container's `ports` by `containerPort`, an Endpoints subset's are atomic).
pub fn declared(parent: &str, field: &str) -> Option<&'static ListField> {
    let under = parent.rsplit_once('.').map_or(parent, |(_, last)| last);
    DECLARING_TYPES
        .iter()
        .filter(|t| t.under.contains(&under))
        .flat_map(|t| t.lists)
        .find(|list| list.field == field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_told_apart_by_where_they_sit() {
        let key = |parent, field| declared(parent, field).and_then(ListField::merge_key);
        assert_eq!(key(".spec", "containers"), Some("name"));
        assert_eq!(key(".spec.template.spec", "containers"), Some("name"));
        assert_eq!(key(".spec.containers", "ports"), Some("containerPort"));
        assert_eq!(key(".spec.template.spec.initContainers", "env"), Some("name"));
        assert_eq!(key(".spec", "ports"), Some("port"));
        assert_eq!(key(".subsets", "ports"), None);
        assert_eq!(key(".subsets", "addresses"), None);
        assert_eq!(key(".status", "addresses"), Some("type"));
        assert_eq!(key("", "secrets"), Some("name"));
        // A ServiceAccount's imagePullSecrets are atomic; a pod's merge by name.
        assert_eq!(key("", "imagePullSecrets"), None);
        assert_eq!(key(".spec", "imagePullSecrets"), Some("name"));
        // Sets: declared, with no key.
        assert_eq!(declared(".metadata", "finalizers").unwrap().keys, &[] as &[&str]);
        assert!(declared(".spec", "finalizers").is_none(), "a namespace's are atomic");
        assert_eq!(declared(".spec", "volumes").unwrap().strategy, "merge,retainKeys");
    }

    #[test]
    fn a_name_declares_one_list_wherever_it_sits() {
        for a in DECLARING_TYPES {
            for b in DECLARING_TYPES.iter().filter(|b| b.under.iter().any(|u| a.under.contains(u)))
            {
                for list in a.lists {
                    let other = b.lists.iter().find(|l| l.field == list.field);
                    assert!(other.is_none_or(|o| o == list), "{}.{}", b.schema, list.field);
                }
            }
        }
    }

    #[test]
    fn keys_are_in_alphabetical_order() {
        for list in DECLARING_TYPES.iter().flat_map(|t| t.lists) {
            assert!(list.keys.is_sorted(), "{}", list.field);
        }
    }
}

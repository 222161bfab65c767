//! The table of served resources: names, kinds, scopes, verbs and the fields each one indexes.

use super::text::same;

/// One served resource type (a REST collection), e.g. `pods` in core/v1. Two are equal when
/// their group and plural are.
#[derive(Debug)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// Plural, lower-case name used in URLs (`pods`).
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Whether `kubectl get all` lists it.
    pub in_category_all: bool,
    /// Field paths a `fieldSelector` may name, besides `metadata.name` and `metadata.namespace`.
    pub selectable_fields: &'static [&'static str],
    /// Subresources served beside the main resource, with their kind and verbs.
    pub subresources: &'static [Subresource],
    /// Names must be DNS-1123 labels (stricter than the default DNS-1123 subdomain).
    pub name_is_label: bool,
}

/// A subresource entry of discovery (`pods/status`, `replicationcontrollers/scale`).
#[derive(Debug, PartialEq, Eq)]
pub struct Subresource {
    pub name: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

/// The verbs of a resource's main endpoint (see `ResourceType::verbs`).
const RESOURCE_VERBS: &[&str] =
    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
/// Namespaces have no `deletecollection`, as in Kubernetes: one request must not empty a
/// cluster.
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

const STATUS_VERBS: &[&str] = &["get", "patch", "update"];
/// A review is only created.
const REVIEW_VERBS: &[&str] = &["create"];
/// Resource metrics and component statuses are only read.
const READ_VERBS: &[&str] = &["get", "list"];

impl PartialEq for ResourceType {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other) || (self.plural == other.plural && same(self.group, other.group))
    }
}

impl Eq for ResourceType {}

impl std::hash::Hash for ResourceType {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.group, self.plural).hash(state)
    }
}

/// A kind or resource with its group, as Kubernetes names them in messages (`Service`,
/// `Lease.coordination.k8s.io`).
pub fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_string()
    } else {
        format!("{name}.{group}")
    }
}

impl ResourceType {
    /// The resource as Kubernetes' messages name it: `configmaps`, `leases.coordination.k8s.io`.
    pub fn qualified_plural(&self) -> String {
        qualified(self.plural, self.group)
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The verbs its main endpoint serves, as discovery lists them.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.group.is_empty() && self.plural == "namespaces" {
            NAMESPACE_VERBS
        } else if self.only_created() {
            REVIEW_VERBS
        } else if self.only_read() {
            READ_VERBS
        } else {
            RESOURCE_VERBS
        }
    }

    /// Whether it is a review (`selfsubjectaccessreviews`, ...): only created, its answer in
    /// the created object's status, nothing stored.
    pub fn is_review(&self) -> bool {
        same(self.group, AUTHENTICATION_GROUP) || same(self.group, AUTHORIZATION_GROUP)
    }

    /// Whether it is the core group's `bindings`: a pod bound to a node by a `Binding` created
    /// in the pod's namespace (as `pods/{name}/binding` binds it), nothing stored.
    pub fn is_binding(&self) -> bool {
        same(self.group, CORE) && self.plural == "bindings"
    }

    /// Whether its only verb is `create`, and what is created is not stored: a review, a
    /// binding.
    pub fn only_created(&self) -> bool {
        self.is_review() || self.is_binding()
    }

    /// Whether it is a metrics.k8s.io resource: the nodes' and pods' usage, read from the
    /// metrics scraper, never stored.
    pub fn is_metrics(&self) -> bool {
        same(self.group, METRICS_GROUP)
    }

    /// Whether it is core/v1 `componentstatuses`: the health of the scheduler, the controller
    /// manager and the store, probed when read, never stored.
    pub fn is_component_status(&self) -> bool {
        same(self.group, CORE) && self.plural == "componentstatuses"
    }

    /// Whether it is only read (get and list), what is read worked out when asked, never
    /// stored: resource metrics, component statuses.
    pub fn only_read(&self) -> bool {
        self.is_metrics() || self.is_component_status()
    }

    /// True when its main endpoint serves `verb` (a discovery verb: `deletecollection`).
    pub fn serves(&self, verb: &str) -> bool {
        self.verbs().contains(&verb)
    }

    /// Whether a delete that removes the object answers with it, as these kinds' storage does
    /// in Kubernetes (`ReturnDeletedObject`); the others answer a Success `Status`.
    pub fn returns_deleted_object(&self) -> bool {
        const RETURNING: &[&str] = &[
            "pods",
            "services",
            "serviceaccounts",
            "resourcequotas",
            "persistentvolumes",
            "persistentvolumeclaims",
            "namespaces",
            "podtemplates",
        ];
        self.group.is_empty() && RETURNING.contains(&self.plural)
    }

    /// Whether its objects carry `metadata.generation`, set to 1 on create and counted up by
    /// every change of the spec, as the strategies of ReplicationControllers,
    /// PodDisruptionBudgets and EndpointSlices do in Kubernetes 1.32 (the other kinds keep
    /// whatever the client sent, if anything). An EndpointSlice has no spec: any change but
    /// its metadata's, or of its labels, counts.
    pub fn tracks_generation(&self) -> bool {
        (self.group.is_empty() && self.plural == "replicationcontrollers")
            || (self.group == POLICY_GROUP && self.plural == "poddisruptionbudgets")
            || (self.group == "discovery.k8s.io" && self.plural == "endpointslices")
    }

    /// Whether an update from `old` to `new` counts in the generation (see
    /// [`Self::tracks_generation`]).
    pub fn generation_changes(&self, old: &serde_json::Value, new: &serde_json::Value) -> bool {
        if !self.tracks_generation() {
            return false;
        }
        if self.plural != "endpointslices" {
            return old.get("spec") != new.get("spec");
        }
        fn labels(o: &serde_json::Value) -> Option<&serde_json::Value> {
            o.get("metadata").and_then(|m| m.get("labels"))
        }
        fn content(o: &serde_json::Value) -> impl Iterator<Item = (&String, &serde_json::Value)> {
            o.as_object().into_iter().flatten().filter(|(field, _)| *field != "metadata")
        }
        labels(old) != labels(new) || !content(old).eq(content(new))
    }

    /// True for the kinds whose update creates the object when there is none, as in Kubernetes
    /// (their strategies' `AllowCreateOnUpdate`).
    pub fn creates_on_update(&self) -> bool {
        const KINDS: &[&str] = &[
            "Endpoints",
            "Event",
            "LimitRange",
            "Service",
            "Lease",
            "Role",
            "ClusterRole",
            "RoleBinding",
            "ClusterRoleBinding",
        ];
        KINDS.contains(&self.kind)
    }

    /// True when `field` may be used in a field selector on this resource: the name, the
    /// namespace (also of a cluster-scoped kind without fields of its own, where it is empty,
    /// as Kubernetes' default conversion takes it; nodes and namespaces refuse it), the kind's
    /// own fields.
    pub fn selects_field(&self, field: &str) -> bool {
        field == "metadata.name"
            || (field == "metadata.namespace"
                && (self.namespaced || self.selectable_fields.is_empty()))
            || self.selectable_fields.contains(&field)
    }

    /// The field a selector's `label` selects on, as Kubernetes' field label conversions read
    /// it (pods: `spec.host`, old v1 clients' name, is `spec.nodeName`; `status.podIPs` is
    /// accepted and, set by no pod's fields, is always empty); `None` when not supported.
    pub fn field_label<'a>(&self, label: &'a str) -> Option<&'a str> {
        match (self.kind, label) {
            ("Pod", "spec.host") => Some("spec.nodeName"),
            ("Pod", "status.podIPs") => Some(label),
            ("Event", _) if same(self.group, EVENTS_GROUP) => {
                self.selects_field(label).then(|| core_event_field(label))
            }
            _ => self.selects_field(label).then_some(label),
        }
    }
}

/// What the `proxy` subresource of nodes, pods and services serves (as discovery lists it).
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

macro_rules! proxy_sub {
    ($kind:expr) => {
        Subresource { name: "proxy", group: "", version: "v1", kind: $kind, verbs: PROXY_VERBS }
    };
}

macro_rules! status_sub {
    ($kind:expr) => {
        Subresource { name: "status", group: "", version: "v1", kind: $kind, verbs: STATUS_VERBS }
    };
}

const CORE: &str = "";
const V1: &str = "v1";

/// Every resource kplane serves, in discovery order.
pub static RESOURCES: &[ResourceType] = &[
    plain(CORE, "bindings", "binding", "Binding", "", true),
    ResourceType {
        group: CORE,
        version: V1,
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        list_kind: "ConfigMapList",
        namespaced: true,
        short_names: &["cm"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        list_kind: "EndpointsList",
        namespaced: true,
        short_names: &["ep"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "events",
        singular: "event",
        kind: "Event",
        list_kind: "EventList",
        namespaced: true,
        short_names: &["ev"],
        in_category_all: false,
        selectable_fields: EVENT_FIELDS,
        subresources: &[],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "limitranges",
        singular: "limitrange",
        kind: "LimitRange",
        list_kind: "LimitRangeList",
        namespaced: true,
        short_names: &["limits"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        list_kind: "NamespaceList",
        namespaced: false,
        short_names: &["ns"],
        in_category_all: false,
        selectable_fields: &["status.phase"],
        subresources: &[
            Subresource {
                name: "finalize",
                group: "",
                version: "v1",
                kind: "Namespace",
                verbs: &["update"],
            },
            status_sub!("Namespace"),
        ],
        name_is_label: true,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "nodes",
        singular: "node",
        kind: "Node",
        list_kind: "NodeList",
        namespaced: false,
        short_names: &["no"],
        in_category_all: false,
        selectable_fields: &["spec.unschedulable"],
        subresources: &[proxy_sub!("NodeProxyOptions"), status_sub!("Node")],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        list_kind: "PersistentVolumeClaimList",
        namespaced: true,
        short_names: &["pvc"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[status_sub!("PersistentVolumeClaim")],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "persistentvolumes",
        singular: "persistentvolume",
        kind: "PersistentVolume",
        list_kind: "PersistentVolumeList",
        namespaced: false,
        short_names: &["pv"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[status_sub!("PersistentVolume")],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        list_kind: "PodList",
        namespaced: true,
        short_names: &["po"],
        in_category_all: true,
        selectable_fields: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        subresources: &[
            status_sub!("Pod"),
            Subresource {
                name: "binding",
                group: "",
                version: "v1",
                kind: "Binding",
                verbs: &["create"],
            },
            Subresource { name: "log", group: "", version: "v1", kind: "Pod", verbs: &["get"] },
            Subresource {
                name: "exec",
                group: "",
                version: "v1",
                kind: "PodExecOptions",
                verbs: &["create", "get"],
            },
            Subresource {
                name: "attach",
                group: "",
                version: "v1",
                kind: "PodAttachOptions",
                verbs: &["create", "get"],
            },
            Subresource {
                name: "portforward",
                group: "",
                version: "v1",
                kind: "PodPortForwardOptions",
                verbs: &["create", "get"],
            },
            proxy_sub!("PodProxyOptions"),
            Subresource {
                name: "ephemeralcontainers",
                group: "",
                version: "v1",
                kind: "Pod",
                verbs: &["get", "patch", "update"],
            },
            Subresource {
                name: "eviction",
                group: POLICY_GROUP,
                version: V1,
                kind: "Eviction",
                verbs: &["create"],
            },
        ],
        name_is_label: false,
    },
    plain(CORE, "podtemplates", "podtemplate", "PodTemplate", "PodTemplateList", true),
    ResourceType {
        short_names: &["cs"],
        ..plain(
            CORE,
            "componentstatuses",
            "componentstatus",
            "ComponentStatus",
            "ComponentStatusList",
            false,
        )
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        kind: "ReplicationController",
        list_kind: "ReplicationControllerList",
        namespaced: true,
        short_names: &["rc"],
        in_category_all: true,
        selectable_fields: &["status.replicas"],
        subresources: &[
            status_sub!("ReplicationController"),
            Subresource {
                name: "scale",
                group: "autoscaling",
                version: "v1",
                kind: "Scale",
                verbs: &["get", "patch", "update"],
            },
        ],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "resourcequotas",
        singular: "resourcequota",
        kind: "ResourceQuota",
        list_kind: "ResourceQuotaList",
        namespaced: true,
        short_names: &["quota"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[status_sub!("ResourceQuota")],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        list_kind: "SecretList",
        namespaced: true,
        short_names: &[],
        in_category_all: false,
        selectable_fields: &["type"],
        subresources: &[],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        list_kind: "ServiceAccountList",
        namespaced: true,
        short_names: &["sa"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[Subresource {
            name: "token",
            group: AUTHENTICATION_GROUP,
            version: V1,
            kind: "TokenRequest",
            verbs: &["create"],
        }],
        name_is_label: false,
    },
    ResourceType {
        group: CORE,
        version: V1,
        plural: "services",
        singular: "service",
        kind: "Service",
        list_kind: "ServiceList",
        namespaced: true,
        short_names: &["svc"],
        in_category_all: true,
        selectable_fields: &["spec.clusterIP", "spec.type"],
        subresources: &[proxy_sub!("ServiceProxyOptions"), status_sub!("Service")],
        name_is_label: true,
    },
    plain("coordination.k8s.io", "leases", "lease", "Lease", "LeaseList", true),
    plain(
        "discovery.k8s.io",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        "EndpointSliceList",
        true,
    ),
    ResourceType {
        group: POLICY_GROUP,
        version: V1,
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        list_kind: "PodDisruptionBudgetList",
        namespaced: true,
        short_names: &["pdb"],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[Subresource {
            name: "status",
            group: POLICY_GROUP,
            version: V1,
            kind: "PodDisruptionBudget",
            verbs: STATUS_VERBS,
        }],
        name_is_label: false,
    },
    // Served from the core/v1 events' storage (see `storage_of`).
    ResourceType {
        group: EVENTS_GROUP,
        version: V1,
        plural: "events",
        singular: "event",
        kind: "Event",
        list_kind: "EventList",
        namespaced: true,
        short_names: &["ev"],
        in_category_all: false,
        selectable_fields: EVENTS_V1_FIELDS,
        subresources: &[],
        name_is_label: false,
    },
    // Reviews: created and answered, never stored (see `is_review`).
    review(
        AUTHENTICATION_GROUP,
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        false,
    ),
    review(AUTHENTICATION_GROUP, "tokenreviews", "tokenreview", "TokenReview", false),
    review(
        AUTHORIZATION_GROUP,
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
    ),
    review(
        AUTHORIZATION_GROUP,
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
    ),
    review(
        AUTHORIZATION_GROUP,
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
    ),
    review(
        AUTHORIZATION_GROUP,
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        false,
    ),
    rbac("roles", "role", "Role", "RoleList", true),
    rbac("clusterroles", "clusterrole", "ClusterRole", "ClusterRoleList", false),
    rbac("rolebindings", "rolebinding", "RoleBinding", "RoleBindingList", true),
    rbac(
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        "ClusterRoleBindingList",
        false,
    ),
    ResourceType {
        short_names: &["pc"],
        ..plain(
            SCHEDULING_GROUP,
            "priorityclasses",
            "priorityclass",
            "PriorityClass",
            "PriorityClassList",
            false,
        )
    },
    metrics("nodes", "NodeMetrics", "NodeMetricsList", false),
    metrics("pods", "PodMetrics", "PodMetricsList", true),
];

/// The group of PriorityClasses.
pub const SCHEDULING_GROUP: &str = "scheduling.k8s.io";

/// The group of the nodes' and pods' resource metrics (`kubectl top`).
pub const METRICS_GROUP: &str = "metrics.k8s.io";

/// A metrics.k8s.io/v1beta1 resource, as metrics-server serves it.
const fn metrics(
    plural: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        version: "v1beta1",
        singular: "",
        ..plain(METRICS_GROUP, plural, "", kind, list_kind, namespaced)
    }
}

/// The group of Roles, ClusterRoles and their bindings.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

const fn rbac(
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    plain(RBAC_GROUP, plural, singular, kind, list_kind, namespaced)
}

const EVENTS_GROUP: &str = "events.k8s.io";
/// The group of PodDisruptionBudgets and of the pods' `eviction` subresource.
pub const POLICY_GROUP: &str = "policy";
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";

/// A review resource: a question asked by creating it, answered in the created object's
/// status, as Kubernetes' `authentication.k8s.io` and `authorization.k8s.io` reviews are.
const fn review(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    plain(group, plural, singular, kind, "", namespaced)
}

/// A v1 resource with no short names, category, selectable fields or subresources.
const fn plain(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group,
        version: V1,
        plural,
        singular,
        kind,
        list_kind,
        namespaced,
        short_names: &[],
        in_category_all: false,
        selectable_fields: &[],
        subresources: &[],
        name_is_label: false,
    }
}

/// The fields events are selected on (in their core/v1 form, which is how they are stored).
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The fields events.k8s.io/v1 events are selected on, in that version's names (Kubernetes'
/// field label conversions for it): its own `regarding` and `reportingController`, not the
/// core names.
const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "source",
    "type",
];

/// The core/v1 name of an events.k8s.io/v1 field label, which is how stored events are read.
fn core_event_field(label: &str) -> &str {
    match label.strip_prefix("regarding.") {
        Some(field) => EVENT_FIELDS
            .iter()
            .find(|core| core.strip_prefix("involvedObject.") == Some(field))
            .copied()
            .unwrap_or(label),
        None if label == "reportingController" => "reportingComponent",
        None => label,
    }
}

/// The resource whose storage holds `resource`'s objects: itself, except for resources served
/// in a second group version (events.k8s.io/v1 events are core/v1 events).
pub fn storage_of(resource: &'static ResourceType) -> &'static ResourceType {
    if resource.plural == "events" && same(resource.group, EVENTS_GROUP) {
        find("", "v1", "events").expect("core events are served")
    } else {
        resource
    }
}

/// Does `resource` have storage of its own (rather than being another version's view)?
pub fn is_stored(resource: &'static ResourceType) -> bool {
    std::ptr::eq(storage_of(resource), resource)
        && !resource.only_created()
        && !resource.only_read()
}

/// The API groups served besides the core group, as `(group, version)`.
pub fn api_groups() -> Vec<(&'static str, &'static str)> {
    let mut groups: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !groups.contains(&(r.group, r.version)) {
            groups.push((r.group, r.version));
        }
    }
    groups
}

/// Looks a resource up by group, version and plural name.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.plural == plural && same(r.group, group) && same(r.version, version))
}

/// A core/v1 resource the components themselves read and write (`pods`, `nodes`...): served
/// always, so a missing one is a bug of the resource table, not of any input.
pub fn core(plural: &str) -> &'static ResourceType {
    find("", "v1", plural).unwrap_or_else(|| panic!("core/v1 {plural} are served"))
}

/// policy/v1 PodDisruptionBudgets.
pub fn disruption_budgets() -> &'static ResourceType {
    find(POLICY_GROUP, "v1", "poddisruptionbudgets").expect("PodDisruptionBudgets are served")
}

/// coordination.k8s.io/v1 Leases: the node agents' heartbeats (in [`NODE_LEASE_NAMESPACE`]).
pub fn leases() -> &'static ResourceType {
    find("coordination.k8s.io", "v1", "leases").expect("Leases are served")
}

/// The namespace of the nodes' Leases, one per node under its name, as the kubelet's.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Looks a resource up by its kind within a group.
pub fn find_by_kind(group: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.kind == kind && same(r.group, group))
}

/// The resources of one group/version, in discovery order.
pub fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceType> + 'a {
    RESOURCES.iter().filter(move |r| same(r.group, group) && same(r.version, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_count_spec_changes_and_a_slice_s_content() {
        use serde_json::json;
        let rcs = core("replicationcontrollers");
        let rc = |replicas: i64, label: &str| json!({"metadata": {"labels": {"a": label}}, "spec": {"replicas": replicas}});
        assert!(rcs.generation_changes(&rc(1, "x"), &rc(2, "x")));
        assert!(!rcs.generation_changes(&rc(1, "x"), &rc(1, "y")));
        let slices = find("discovery.k8s.io", "v1", "endpointslices").unwrap();
        let slice = |address: &str, label: &str, annotation: &str| {
            json!({"metadata": {"labels": {"a": label}, "annotations": {"b": annotation}},
                "addressType": "IPv4", "endpoints": [{"addresses": [address]}]})
        };
        let base = slice("127.0.0.1", "x", "y");
        assert!(slices.generation_changes(&base, &slice("127.0.0.2", "x", "y")));
        assert!(slices.generation_changes(&base, &slice("127.0.0.1", "z", "y")));
        assert!(!slices.generation_changes(&base, &slice("127.0.0.1", "x", "z")));
        assert!(!core("configmaps").generation_changes(&base, &json!({})));
    }

    #[test]
    fn plurals_are_unique_per_group() {
        for (i, a) in RESOURCES.iter().enumerate() {
            for b in &RESOURCES[i + 1..] {
                assert!(!(a.group == b.group && a.plural == b.plural), "{} twice", a.plural);
            }
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(find("", "v1", "pods").unwrap().kind, "Pod");
        assert_eq!(find_by_kind("coordination.k8s.io", "Lease").unwrap().plural, "leases");
        assert!(find("", "v1", "deployments").is_none());
        let groups = vec![
            ("coordination.k8s.io", "v1"),
            ("discovery.k8s.io", "v1"),
            ("policy", "v1"),
            ("events.k8s.io", "v1"),
            ("authentication.k8s.io", "v1"),
            ("authorization.k8s.io", "v1"),
            ("rbac.authorization.k8s.io", "v1"),
            ("scheduling.k8s.io", "v1"),
            ("metrics.k8s.io", "v1beta1"),
        ];
        assert_eq!(api_groups(), groups);
        let reviews = find("authorization.k8s.io", "v1", "selfsubjectaccessreviews").unwrap();
        assert!(reviews.is_review() && !is_stored(reviews) && reviews.verbs() == ["create"]);
        assert!(!find("", "v1", "pods").unwrap().is_review());
        let pod_metrics = find("metrics.k8s.io", "v1beta1", "pods").unwrap();
        assert!(pod_metrics.is_metrics() && !is_stored(pod_metrics));
        assert_eq!(pod_metrics.verbs(), ["get", "list"]);
        let statuses = find("", "v1", "componentstatuses").unwrap();
        assert!(statuses.is_component_status() && !is_stored(statuses));
        assert_eq!((statuses.verbs(), statuses.short_names), (&["get", "list"][..], &["cs"][..]));
        assert_eq!(find("", "v1", "pods").unwrap().kind, "Pod");
        let events = find("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(storage_of(events), find("", "v1", "events").unwrap());
        assert!(!is_stored(events) && is_stored(storage_of(events)));
        assert!(find("", "v1", "pods").unwrap().selects_field("spec.nodeName"));
        assert!(!find("", "v1", "nodes").unwrap().selects_field("metadata.namespace"));
    }

    #[test]
    fn events_v1_select_on_their_own_field_names_read_as_the_core_ones() {
        let (core, v1) =
            (find("", "v1", "events").unwrap(), find("events.k8s.io", "v1", "events").unwrap());
        for (label, field) in [
            ("regarding.name", "involvedObject.name"),
            ("regarding.fieldPath", "involvedObject.fieldPath"),
            ("reportingController", "reportingComponent"),
            ("reason", "reason"),
            ("source", "source"),
            ("metadata.namespace", "metadata.namespace"),
        ] {
            assert_eq!(v1.field_label(label), Some(field), "{label}");
        }
        for label in ["involvedObject.name", "reportingComponent", "note"] {
            assert_eq!(v1.field_label(label), None, "{label}");
        }
        assert_eq!(core.field_label("involvedObject.name"), Some("involvedObject.name"));
        assert_eq!(core.field_label("regarding.name"), None);
    }
}

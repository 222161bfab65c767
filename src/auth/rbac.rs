//! RBAC (`rbac.authorization.k8s.io/v1`): the Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings the server serves, kept here as their list-watches report them, and
//! decided as Kubernetes' RBAC authorizer decides: a request is allowed when a rule of a role
//! bound to the user allows it. ClusterRoleBindings grant their ClusterRole everywhere;
//! RoleBindings grant their Role, or a ClusterRole, in their namespace only. A binding's
//! subjects are Users (by name), Groups (by the user's groups) and ServiceAccounts
//! (`system:serviceaccount:NS:NAME`). A rule allows a verb (`*` for any) on API groups,
//! resources (`pods/log` for a subresource, `*/scale`, `*`) and optionally named objects, or
//! on non-resource URLs (exact, `*`, or a prefix ending in `*`). Aggregated ClusterRoles are
//! not put together.

use std::collections::BTreeMap;
use std::sync::RwLock;

use kplane_actors::controllers::cluster_role_aggregation::aggregated_rules;
use serde_json::{json, Value};

use super::attributes::Attributes;
use super::UserInfo;
use kplane_actors::client::cache::{apply_feed, key_of};
use kplane_actors::client::informer::Feed;
use kplane_actors::model::json::strings;

/// One rule of a role.
#[derive(Debug, Clone, Default)]
struct Rule {
    verbs: Vec<String>,
    api_groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    non_resource_urls: Vec<String>,
}

#[derive(Debug, Clone)]
struct Subject {
    kind: String,
    name: String,
    namespace: String,
}

#[derive(Debug, Clone)]
struct Binding {
    /// The binding's namespace (empty for a ClusterRoleBinding).
    namespace: String,
    /// `Role` or `ClusterRole`.
    role_kind: String,
    role_name: String,
    subjects: Vec<Subject>,
}

type Key = (String, String);

/// What visiting a user's bindings meets: a rule and where it comes from, or a binding whose
/// role does not exist (the error, as Kubernetes words it).
enum Granted<'a> {
    Rule(&'a Rule, Source<'a>),
    RoleMissing(String),
}

/// The binding a rule is granted by, and its subject the user is.
#[derive(Clone, Copy)]
struct Source<'a> {
    /// The ClusterRoleBinding's name, or the RoleBinding's `name/namespace`.
    name: &'a str,
    binding: &'a Binding,
    subject: &'a Subject,
}

impl Source<'_> {
    /// `ClusterRoleBinding "b" of ClusterRole "r" to User "u"`, as Kubernetes describes it
    /// (a service account as `"name/namespace"`).
    fn describe(&self) -> String {
        let of_binding =
            if self.binding.namespace.is_empty() { "ClusterRoleBinding" } else { "RoleBinding" };
        let subject = &self.subject;
        let named = match subject.kind.as_str() {
            "ServiceAccount" => {
                let namespace = if subject.namespace.is_empty() {
                    &self.binding.namespace
                } else {
                    &subject.namespace
                };
                format!("{}/{namespace}", subject.name)
            }
            _ => subject.name.clone(),
        };
        format!(
            "{of_binding} {:?} of {} {:?} to {} {named:?}",
            self.name, self.binding.role_kind, self.binding.role_name, subject.kind
        )
    }
}

#[derive(Debug, Default)]
struct Objects {
    roles: BTreeMap<Key, Vec<Rule>>,
    cluster_roles: BTreeMap<String, Vec<Rule>>,
    role_bindings: BTreeMap<Key, Binding>,
    cluster_role_bindings: BTreeMap<String, Binding>,
}

/// The RBAC objects, as their list-watches last reported them.
#[derive(Debug, Default)]
pub struct RbacStore {
    objects: RwLock<Objects>,
    /// Which of [`RESOURCES`] have been listed (a bit each).
    listed: std::sync::atomic::AtomicU8,
    /// Woken at each list, for [`RbacStore::until_ready`].
    lists: tokio::sync::Notify,
}

/// The resources it follows.
pub const RESOURCES: [&str; 4] = ["roles", "clusterroles", "rolebindings", "clusterrolebindings"];

fn text(value: &Value, key: &str) -> String {
    value.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn rules(role: &Value) -> Vec<Rule> {
    let rules = role.get("rules").and_then(Value::as_array).into_iter().flatten();
    rules
        .map(|r| Rule {
            verbs: strings(r, "verbs"),
            api_groups: strings(r, "apiGroups"),
            resources: strings(r, "resources"),
            resource_names: strings(r, "resourceNames"),
            non_resource_urls: strings(r, "nonResourceURLs"),
        })
        .collect()
}

fn binding(object: &Value, namespace: &str) -> Binding {
    let role = object.get("roleRef").cloned().unwrap_or(Value::Null);
    let subjects = object.get("subjects").and_then(Value::as_array).into_iter().flatten();
    Binding {
        namespace: namespace.to_string(),
        role_kind: text(&role, "kind"),
        role_name: text(&role, "name"),
        subjects: subjects
            .map(|s| Subject {
                kind: text(s, "kind"),
                name: text(s, "name"),
                namespace: text(s, "namespace"),
            })
            .collect(),
    }
}

fn any_or(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

impl Rule {
    fn allows(&self, a: &Attributes) -> bool {
        if !any_or(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || *url == a.path
                    || url.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
            });
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let resource_matches = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
        });
        any_or(&self.api_groups, &a.api_group)
            && resource_matches
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }

    fn to_json(&self) -> (Option<Value>, Option<Value>) {
        let resource = (!self.resources.is_empty()).then(|| {
            let mut rule = json!({"verbs": self.verbs, "apiGroups": self.api_groups,
                "resources": self.resources});
            if !self.resource_names.is_empty() {
                rule["resourceNames"] = json!(self.resource_names);
            }
            rule
        });
        let non_resource = (!self.non_resource_urls.is_empty())
            .then(|| json!({"verbs": self.verbs, "nonResourceURLs": self.non_resource_urls}));
        (resource, non_resource)
    }
}

impl Subject {
    fn applies_to(&self, user: &UserInfo, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => user.name == self.name,
            "Group" => user.groups.contains(&self.name),
            "ServiceAccount" => {
                let namespace =
                    if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                super::service_account_of(&user.name) == Some((namespace, self.name.as_str()))
            }
            _ => false,
        }
    }
}

impl RbacStore {
    /// Applies a report of the list-watch of `resource` (one of [`RESOURCES`]).
    pub fn apply(&self, resource: &str, feed: Feed) {
        if matches!(feed, Feed::Listed(_)) {
            if let Some(bit) = RESOURCES.iter().position(|r| *r == resource) {
                self.listed.fetch_or(1 << bit, std::sync::atomic::Ordering::Release);
                self.lists.notify_waiters();
            }
        }
        let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
        let objects = &mut *objects;
        let by_name = |o: &Value| key_of(o).1;
        // The keys changed are of no use here: every decision reads the maps anew.
        match resource {
            "roles" => {
                apply_feed(&mut objects.roles, feed, key_of, |o| rules(&o));
            }
            "clusterroles" => {
                apply_feed(&mut objects.cluster_roles, feed, by_name, |o| rules(&o));
            }
            "rolebindings" => {
                let read = |o: Value| binding(&o, &key_of(&o).0);
                apply_feed(&mut objects.role_bindings, feed, key_of, read);
            }
            _ => {
                apply_feed(&mut objects.cluster_role_bindings, feed, by_name, |o| binding(&o, ""));
            }
        }
    }

    /// Every rule granted to `user` in `namespace` (cluster-wide ones included), with where
    /// it comes from, and every binding of the user's whose role does not exist; in
    /// Kubernetes' order (ClusterRoleBindings, then the namespace's RoleBindings), until
    /// `visit` says stop.
    fn granted(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(Granted<'_>) -> bool,
    ) {
        let objects = self.objects.read().unwrap_or_else(|p| p.into_inner());
        let cluster = objects
            .cluster_role_bindings
            .iter()
            .filter(|(_, b)| b.role_kind == "ClusterRole")
            .map(|(name, b)| (name.clone(), b));
        let local = objects
            .role_bindings
            .iter()
            .filter(|(_, b)| !namespace.is_empty() && b.namespace == namespace)
            .map(|((ns, name), b)| (format!("{name}/{ns}"), b));
        for (name, binding) in cluster.chain(local) {
            let Some(subject) =
                binding.subjects.iter().find(|s| s.applies_to(user, &binding.namespace))
            else {
                continue;
            };
            let rules = match binding.role_kind.as_str() {
                "ClusterRole" => objects.cluster_roles.get(&binding.role_name),
                _ => objects.roles.get(&(binding.namespace.clone(), binding.role_name.clone())),
            };
            let Some(rules) = rules else {
                let kind = binding.role_kind.to_ascii_lowercase();
                let missing =
                    format!("{kind}.rbac.authorization.k8s.io {:?} not found", binding.role_name);
                if !visit(Granted::RoleMissing(missing)) {
                    return;
                }
                continue;
            };
            let source = Source { name: &name, binding, subject };
            for rule in rules {
                if !visit(Granted::Rule(rule, source)) {
                    return;
                }
            }
        }
    }

    /// Whether every one of [`RESOURCES`] has been listed: before that, what is bound is not
    /// known yet, and the server does not serve.
    pub fn ready(&self) -> bool {
        let all = (1u8 << RESOURCES.len()) - 1;
        self.listed.load(std::sync::atomic::Ordering::Acquire) == all
    }

    /// Resolves once [`RbacStore::ready`].
    pub async fn until_ready(&self) {
        loop {
            // Waiting is registered before the check, so a list in between is not missed.
            let listed = self.lists.notified();
            if self.ready() {
                return;
            }
            listed.await;
        }
    }

    /// Whether a rule granted to `user` allows `a`, and why, as Kubernetes' RBAC authorizer
    /// says it: `RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to User "u"`;
    /// else the bindings whose roles are missing (`RBAC: clusterrole.rbac.authorization.k8s.io
    /// "nope" not found`), or nothing.
    pub fn decide(&self, user: &UserInfo, a: &Attributes) -> (bool, String) {
        let mut allowed_by = None;
        let mut missing = Vec::new();
        self.granted(user, &a.namespace, |granted| match granted {
            Granted::Rule(rule, source) if rule.allows(a) => {
                allowed_by = Some(source.describe());
                false
            }
            Granted::Rule(..) => true,
            Granted::RoleMissing(error) => {
                missing.push(error);
                true
            }
        });
        match allowed_by {
            Some(source) => (true, format!("RBAC: allowed by {source}")),
            None if missing.is_empty() => (false, String::new()),
            None => (false, format!("RBAC: {}", kplane_actors::core::aggregate(missing))),
        }
    }

    /// The rules `user` has in `namespace`, as a SelfSubjectRulesReview lists them, and the
    /// errors met finding them (bindings whose roles are missing).
    pub fn rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
    ) -> ((Vec<Value>, Vec<Value>), Vec<String>) {
        let (mut resources, mut paths, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        self.granted(user, namespace, |granted| {
            match granted {
                Granted::Rule(rule, _) => {
                    let (resource, path) = rule.to_json();
                    resources.extend(resource);
                    paths.extend(path);
                }
                Granted::RoleMissing(error) => errors.push(error),
            }
            true
        });
        ((resources, paths), errors)
    }
}

/// The roles and bindings every cluster starts with (Kubernetes' bootstrap policy, its part
/// that concerns what kplane serves): `cluster-admin` for the group `system:masters`,
/// `system:basic-user` (asking who one is and what one may do) and `system:discovery` for
/// every authenticated user, `system:public-info-viewer` (health and version) for everyone,
/// `system:service-account-issuer-discovery` (the token issuer's keys) for service accounts,
/// `system:monitoring` (health and metrics) for the group of that name, `system:node-proxier`
/// for the user `system:kube-proxy`, `system:auth-delegator` and the kube-system Role
/// `extension-apiserver-authentication-reader` to bind (as metrics-server's manifests do);
/// and the user-facing `view`, `edit` and `admin`, unbound, to grant in a namespace. As in
/// Kubernetes, these three aggregate (the ClusterRole aggregation controller keeps their
/// rules): `view` the roles labelled `rbac.authorization.k8s.io/aggregate-to-view`, which
/// `system:aggregate-to-view` is, `edit` those labelled `aggregate-to-edit` (`view` among them)
/// and `admin` those labelled `aggregate-to-admin` (`edit` among them). They start with the
/// rules aggregated already, so that they grant from the first request.
pub fn bootstrap_policy() -> Vec<(&'static str, Value)> {
    let meta = |name: &str| {
        json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
    };
    let role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta(name), "rules": rules})
    };
    let bind = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta(name), "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}})
    };
    let public = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let discovery = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
        "/version",
        "/version/",
        "/healthz",
        "/livez",
        "/readyz",
    ];
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let view = json!([
        {"verbs": read, "apiGroups": [""], "resources": ["configmaps", "endpoints",
            "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "pods/log",
            "pods/status", "replicationcontrollers", "replicationcontrollers/scale",
            "replicationcontrollers/status", "serviceaccounts", "services", "services/status",
            "bindings", "events", "limitranges", "resourcequotas", "resourcequotas/status",
            "namespaces", "namespaces/status"]},
        {"verbs": read, "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]},
        {"verbs": read, "apiGroups": ["policy"], "resources": ["poddisruptionbudgets",
            "poddisruptionbudgets/status"]},
        {"verbs": read, "apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"]},
    ]);
    let edit = json!([
        json!({"verbs": read, "apiGroups": [""], "resources": ["pods/attach", "pods/exec",
            "pods/portforward", "pods/proxy", "secrets", "services/proxy"]}),
        json!({"verbs": ["impersonate"], "apiGroups": [""], "resources": ["serviceaccounts"]}),
        json!({"verbs": write, "apiGroups": [""], "resources": ["pods", "pods/attach",
            "pods/exec", "pods/portforward", "pods/proxy", "configmaps", "events",
            "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale",
            "secrets", "serviceaccounts", "services", "services/proxy"]}),
        json!({"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]}),
        json!({"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]}),
        json!({"verbs": write, "apiGroups": ["policy"], "resources": ["poddisruptionbudgets"]}),
        // Leader election in a namespace (since Kubernetes 1.25).
        json!({"verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
            "update", "watch"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}),
    ]);
    let admin = json!([
        json!({"verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
            "update", "watch"], "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["rolebindings", "roles"]}),
        json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["localsubjectaccessreviews"]}),
    ]);
    let aggregated = aggregated_roles([("view", view), ("edit", edit), ("admin", admin)], role);
    let mut policy: Vec<(&'static str, Value)> =
        aggregated.into_iter().map(|role| ("clusterroles", role)).collect();
    policy.extend([
        (
            "clusterroles",
            role(
                "cluster-admin",
                json!([
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:basic-user",
                json!([
            {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
             "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}]),
            ),
        ),
        (
            "clusterroles",
            role("system:discovery", json!([{"verbs": ["get"], "nonResourceURLs": discovery}])),
        ),
        (
            "clusterroles",
            role(
                "system:public-info-viewer",
                json!([{"verbs": ["get"], "nonResourceURLs": public}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:service-account-issuer-discovery",
                json!([{"verbs": ["get"], "nonResourceURLs": [
                    "/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                    "/openid/v1/jwks", "/openid/v1/jwks/"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:auth-delegator",
                json!([
            {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"]},
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:monitoring",
                json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/metrics/slis",
                    "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:node-proxier",
                json!([
            {"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["services", "endpoints"]},
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["nodes"]},
            {"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]},
            {"verbs": ["list", "watch"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]}]),
            ),
        ),
        ("clusterrolebindings", bind("cluster-admin", &["system:masters"])),
        ("clusterrolebindings", bind("system:monitoring", &["system:monitoring"])),
        ("clusterrolebindings", {
            let mut binding = bind("system:node-proxier", &[]);
            binding["subjects"] = json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                "name": "system:kube-proxy"}]);
            binding
        }),
        // What extension API servers (metrics-server) bind to read the authentication settings.
        ("roles", {
            let mut reader = role("extension-apiserver-authentication-reader", json!([
                {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"],
                    "resourceNames": ["extension-apiserver-authentication"]}]));
            reader["kind"] = json!("Role");
            reader["metadata"]["namespace"] = json!("kube-system");
            reader
        }),
        ("clusterrolebindings", bind("system:basic-user", &["system:authenticated"])),
        ("clusterrolebindings", bind("system:discovery", &["system:authenticated"])),
        (
            "clusterrolebindings",
            bind("system:service-account-issuer-discovery", &["system:serviceaccounts"]),
        ),
        (
            "clusterrolebindings",
            bind("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
        ),
    ]);
    policy
}

/// `view`, `edit` and `admin` (given in that order, each with the rules it adds to the one
/// before) as Kubernetes builds them: each one's own rules in a `system:aggregate-to-*` role,
/// labelled for it; each user-facing role aggregating its label, and labelled itself for the
/// role above (so `admin` takes `view`'s through `edit`); its rules aggregated here as the
/// controller would. `role` makes a bootstrap ClusterRole of a name and rules.
fn aggregated_roles(levels: [(&str, Value); 3], role: impl Fn(&str, Value) -> Value) -> Vec<Value> {
    const LABEL: &str = "rbac.authorization.k8s.io/aggregate-to-";
    let names: Vec<&str> = levels.iter().map(|(name, _)| *name).collect();
    // Labels `role` for the aggregating role of level `level`, if there is one.
    let label = |role: &mut Value, level: usize| {
        if let Some(name) = names.get(level) {
            role["metadata"]["labels"][format!("{LABEL}{name}")] = json!("true");
        }
    };
    let mut roles: BTreeMap<String, Value> = BTreeMap::new();
    let mut ordered = Vec::new();
    for (level, (name, rules)) in levels.into_iter().enumerate() {
        let parts = format!("system:aggregate-to-{name}");
        let mut part = role(&parts, rules);
        label(&mut part, level);
        roles.insert(parts, part.clone());
        let mut aggregating = role(name, json!([]));
        label(&mut aggregating, level + 1);
        aggregating["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {format!("{LABEL}{name}"): "true"}}]});
        aggregating["rules"] =
            Value::Array(aggregated_rules(&aggregating, &roles).unwrap_or_default());
        roles.insert(name.to_string(), aggregating.clone());
        ordered.extend([part, aggregating]);
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::Method;

    fn allowed(rbac: &RbacStore, user: &UserInfo, asked: &Attributes) -> bool {
        rbac.decide(user, asked).0
    }
    use kplane_actors::watch::EventType;
    use std::collections::HashMap;

    #[test]
    fn view_edit_and_admin_are_labelled_as_kubernetes_labels_them() {
        let labels = |name: &str| {
            let policy = bootstrap_policy();
            let (_, role) = policy.iter().find(|(_, o)| o["metadata"]["name"] == name).unwrap();
            let labels = role["metadata"]["labels"].as_object().unwrap().clone();
            let mut keys: Vec<String> =
                labels.keys().filter(|k| k.contains("aggregate-to")).cloned().collect();
            keys.sort();
            keys
        };
        let to = |name: &str| vec![format!("rbac.authorization.k8s.io/aggregate-to-{name}")];
        assert_eq!(labels("view"), to("edit"));
        assert_eq!(labels("edit"), to("admin"));
        assert!(labels("admin").is_empty());
        assert_eq!(labels("system:aggregate-to-view"), to("view"));
        assert_eq!(labels("system:aggregate-to-admin"), to("admin"));
    }

    fn store() -> RbacStore {
        let store = RbacStore::default();
        let mut by_resource: HashMap<&str, Vec<Value>> = HashMap::new();
        for (resource, object) in bootstrap_policy() {
            by_resource.entry(resource).or_default().push(object);
        }
        by_resource.entry("roles").or_default().push(json!({
            "metadata": {"namespace": "team", "name": "pod-reader"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}]}));
        by_resource.entry("rolebindings").or_default().push(json!({
            "metadata": {"namespace": "team", "name": "read-pods"},
            "subjects": [{"kind": "User", "name": "bob"}, {"kind": "ServiceAccount", "name": "ci"}],
            "roleRef": {"kind": "Role", "name": "pod-reader", "apiGroup": "rbac.authorization.k8s.io"}}));
        for resource in RESOURCES {
            store.apply(resource, Feed::Listed(by_resource.remove(resource).unwrap_or_default()));
        }
        store
    }

    fn ask(method: Method, path: &str) -> Attributes {
        Attributes::of(&method, path, "")
    }

    /// The bootstrap roles of the components and tools that bind them: the monitoring group
    /// reads metrics and health, kube-proxy what it proxies to; the kube-system Role extension
    /// API servers bind is there to bind.
    #[test]
    fn monitoring_and_the_proxier_are_granted_what_they_need() {
        let rbac = store();
        let monitor = UserInfo::authenticated("prometheus", "1", vec!["system:monitoring".into()]);
        assert!(allowed(&rbac, &monitor, &ask(Method::GET, "/metrics")));
        assert!(allowed(&rbac, &monitor, &ask(Method::GET, "/readyz/etcd")));
        assert!(!allowed(&rbac, &monitor, &ask(Method::GET, "/api/v1/pods")));
        let proxy = UserInfo::authenticated("system:kube-proxy", "2", Vec::new());
        let slices = "/apis/discovery.k8s.io/v1/endpointslices";
        assert!(allowed(&rbac, &proxy, &ask(Method::GET, slices)));
        assert!(allowed(&rbac, &proxy, &ask(Method::POST, "/api/v1/namespaces/default/events")));
        assert!(!allowed(&rbac, &proxy, &ask(Method::GET, "/api/v1/namespaces/default/secrets")));
        let policy = bootstrap_policy();
        let reader = policy
            .iter()
            .find(|(_, o)| o["metadata"]["name"] == "extension-apiserver-authentication-reader");
        let (plural, reader) = reader.expect("bootstrapped");
        assert_eq!((*plural, &reader["metadata"]["namespace"]), ("roles", &json!("kube-system")));
    }

    #[test]
    fn view_reads_and_edit_writes_but_neither_touches_roles() {
        let rbac = store();
        let bind = |name: &str, role: &str| {
            json!({
            "metadata": {"namespace": "team", "name": name},
            "subjects": [{"kind": "User", "name": name}],
            "roleRef": {"kind": "ClusterRole", "name": role, "apiGroup": "rbac.authorization.k8s.io"}})
        };
        rbac.apply("rolebindings", Feed::Changed(EventType::Added, bind("viewer", "view")));
        rbac.apply("rolebindings", Feed::Changed(EventType::Added, bind("editor", "edit")));
        rbac.apply("rolebindings", Feed::Changed(EventType::Added, bind("owner", "admin")));
        let user = |name: &str| UserInfo::authenticated(name, "", vec![]);
        let pods = ask(Method::GET, "/api/v1/namespaces/team/pods");
        let new_secret = ask(Method::POST, "/api/v1/namespaces/team/secrets");
        let new_role =
            ask(Method::POST, "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles");
        assert!(allowed(&rbac, &user("viewer"), &pods));
        assert!(!allowed(
            &rbac,
            &user("viewer"),
            &ask(Method::GET, "/api/v1/namespaces/team/secrets")
        ));
        assert!(
            allowed(&rbac, &user("editor"), &new_secret)
                && !allowed(&rbac, &user("viewer"), &new_secret)
        );
        assert!(!allowed(&rbac, &user("editor"), &new_role));
        assert!(allowed(&rbac, &user("owner"), &new_role));
        // Leader election: editors and admins take leases, viewers do not.
        let new_lease = ask(Method::POST, "/apis/coordination.k8s.io/v1/namespaces/team/leases");
        assert!(allowed(&rbac, &user("editor"), &new_lease));
        assert!(allowed(&rbac, &user("owner"), &new_lease));
        assert!(!allowed(&rbac, &user("viewer"), &new_lease));
        assert!(!allowed(
            &rbac,
            &user("owner"),
            &ask(Method::GET, "/api/v1/namespaces/other/pods")
        ));
    }

    #[test]
    fn bound_roles_allow_what_their_rules_say() {
        let rbac = store();
        let bob = UserInfo::authenticated("bob", "", vec![]);
        assert!(allowed(&rbac, &bob, &ask(Method::GET, "/api/v1/namespaces/team/pods")));
        assert!(allowed(&rbac, &bob, &ask(Method::GET, "/api/v1/namespaces/team/pods/web/log")));
        assert!(!allowed(&rbac, &bob, &ask(Method::DELETE, "/api/v1/namespaces/team/pods/web")));
        assert!(!allowed(&rbac, &bob, &ask(Method::GET, "/api/v1/namespaces/other/pods")));
        assert!(!allowed(&rbac, &bob, &ask(Method::GET, "/api/v1/namespaces/team/pods/web/exec")));
        assert!(allowed(&rbac, &bob, &ask(Method::GET, "/apis")), "discovery");
        let account = UserInfo::authenticated("system:serviceaccount:team:ci", "", vec![]);
        assert!(allowed(&rbac, &account, &ask(Method::GET, "/api/v1/namespaces/team/pods")));
        let admin = UserInfo::authenticated("root", "", vec!["system:masters".into()]);
        assert!(allowed(&rbac, &admin, &ask(Method::DELETE, "/api/v1/nodes/n1")));
        assert!(allowed(&rbac, &UserInfo::anonymous(), &ask(Method::GET, "/healthz")));
        assert!(!allowed(&rbac, &UserInfo::anonymous(), &ask(Method::GET, "/api")));
        let ((resources, _), errors) = rbac.rules_for(&bob, "team");
        assert!(
            resources.iter().any(|r| r["resources"] == json!(["pods", "pods/log"])),
            "{resources:?}"
        );
        assert!(errors.is_empty());
        // Why: the binding, its role and the subject the user is, as Kubernetes says it.
        let (yes, reason) = rbac.decide(&bob, &ask(Method::GET, "/api/v1/namespaces/team/pods"));
        assert!(yes);
        assert!(
            reason.starts_with("RBAC: allowed by RoleBinding \"") && reason.contains("/team\" of"),
            "{reason}"
        );
        let (_, reason) = rbac.decide(&admin, &ask(Method::DELETE, "/api/v1/nodes/n1"));
        assert_eq!(
            reason,
            "RBAC: allowed by ClusterRoleBinding \"cluster-admin\" of ClusterRole \"cluster-admin\" \
             to Group \"system:masters\""
        );

        // A deleted binding grants nothing any more.
        let binding = json!({"metadata": {"namespace": "team", "name": "read-pods"}});
        rbac.apply("rolebindings", Feed::Changed(EventType::Deleted, binding));
        assert!(!allowed(&rbac, &bob, &ask(Method::GET, "/api/v1/namespaces/team/pods")));
        // A binding to a role that does not exist grants nothing, and says so.
        let dangling = json!({"metadata": {"namespace": "team", "name": "dangling"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nope"},
            "subjects": [{"kind": "User", "name": "bob"}]});
        rbac.apply("rolebindings", Feed::Changed(EventType::Added, dangling));
        let refused = rbac.decide(&bob, &ask(Method::GET, "/api/v1/namespaces/team/pods"));
        assert_eq!(
            refused,
            (false, "RBAC: clusterrole.rbac.authorization.k8s.io \"nope\" not found".to_string())
        );
        let (_, errors) = rbac.rules_for(&bob, "team");
        assert_eq!(errors, ["clusterrole.rbac.authorization.k8s.io \"nope\" not found"]);
    }
}

//! Authorization: `--authorization-mode` lists one or more of `AlwaysAllow`, `AlwaysDeny`,
//! `ABAC` and `RBAC` (`RBAC,ABAC`, as kube-apiserver takes them); a request is allowed when one
//! of them allows it. `RBAC` is [`super::rbac`]'s. `ABAC` reads a policy file
//! (`--authorization-policy-file`): one `abac.authorization.kubernetes.io/v1beta1` Policy a
//! line, matched as Kubernetes' ABAC authorizer matches it. A policy's subject is its `user`
//! and/or `group` (`*` for any); any policy whose subject matches allows reading (`get`,
//! `list`, `watch`), and writing too unless it is `readonly`; a resource request must match its
//! `namespace`, `resource` and `apiGroup` (`*` for any), a non-resource request its
//! `nonResourcePath` (exact, `*`, or a prefix ending in `*`). A request no policy allows is
//! denied.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::attributes::Attributes;
use super::rbac::RbacStore;
use super::{AuthConfigError, UserInfo};

/// How requests on the secure port are authorized: by any of its modes.
#[derive(Debug)]
pub struct Authorizer {
    modes: Vec<Mode>,
}

#[derive(Debug)]
enum Mode {
    AlwaysAllow,
    AlwaysDeny,
    Abac(Vec<PolicySpec>),
    Rbac(Arc<RbacStore>),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Policy {
    api_version: String,
    kind: String,
    spec: PolicySpec,
}

/// One ABAC policy.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PolicySpec {
    user: String,
    group: String,
    readonly: bool,
    api_group: String,
    resource: String,
    namespace: String,
    non_resource_path: String,
}

const POLICY_VERSION: &str = "abac.authorization.kubernetes.io/v1beta1";

impl Authorizer {
    /// The authorizer of `modes`, a comma-separated list of `AlwaysAllow`, `AlwaysDeny`, `ABAC`
    /// and `RBAC`.
    pub fn new(modes: &str, policy_file: Option<&Path>) -> Result<Self, String> {
        let mut parsed = Vec::new();
        for mode in modes.split(',').map(str::trim) {
            parsed.push(match mode {
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "RBAC" => Mode::Rbac(Arc::default()),
                "ABAC" => {
                    let path = policy_file.ok_or("ABAC needs server.authorization_policy_file")?;
                    Mode::Abac(read_policies(path).map_err(|e| e.to_string())?)
                }
                other => {
                    return Err(format!(
                        "{other:?}: each mode must be \"AlwaysAllow\", \"AlwaysDeny\", \"ABAC\" or \"RBAC\""
                    ))
                }
            });
        }
        Ok(Authorizer { modes: parsed })
    }

    /// Whether some mode allows everything (anonymous requests are then refused).
    pub fn always_allows(&self) -> bool {
        self.modes.iter().any(|m| matches!(m, Mode::AlwaysAllow))
    }

    /// The RBAC objects to keep current, when RBAC is a mode.
    pub fn rbac(&self) -> Option<Arc<RbacStore>> {
        self.modes.iter().find_map(|m| match m {
            Mode::Rbac(store) => Some(store.clone()),
            _ => None,
        })
    }

    /// Whether `user` may do what `attributes` say.
    pub fn allows(&self, user: &UserInfo, attributes: &Attributes) -> bool {
        self.decide(user, attributes).allowed
    }

    /// Whether `user` may do what `attributes` say, and why, as kube-apiserver's union of
    /// authorizers decides: a member of `system:masters` may do anything (its privileged
    /// group, asked first); then each mode in turn, the first that allows deciding (with its
    /// reason: RBAC's names the binding); a denial gives every mode's reason (`Everything is
    /// forbidden.`, `No policy matched.`, RBAC's missing roles), one a line.
    pub fn decide(&self, user: &UserInfo, attributes: &Attributes) -> Decision {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Decision { allowed: true, reason: String::new() };
        }
        let mut reasons = Vec::new();
        for mode in &self.modes {
            let (allowed, reason) = match mode {
                Mode::AlwaysAllow => (true, String::new()),
                Mode::AlwaysDeny => (false, "Everything is forbidden.".to_string()),
                Mode::Abac(policies) => {
                    match policies.iter().any(|p| p.matches(user, attributes)) {
                        true => (true, String::new()),
                        false => (false, "No policy matched.".to_string()),
                    }
                }
                Mode::Rbac(store) => store.decide(user, attributes),
            };
            if allowed {
                return Decision { allowed, reason };
            }
            if !reason.is_empty() {
                reasons.push(reason);
            }
        }
        Decision { allowed: false, reason: reasons.join("\n") }
    }
}

/// An authorization decision and its reason (empty when none was given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// The group whose members may do anything.
pub(crate) const PRIVILEGED_GROUP: &str = "system:masters";

/// What a user may do in a namespace, as a SelfSubjectRulesReview lists it: the resource rules
/// and the non-resource rules (Kubernetes' `RulesFor`).
pub type Rules = (Vec<serde_json::Value>, Vec<serde_json::Value>);

impl Authorizer {
    /// The rules, and the errors met finding them (RBAC bindings whose roles are missing).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Rules, Vec<String>) {
        let (mut resources, mut paths, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        for mode in &self.modes {
            let ((more_resources, more_paths), more_errors) = mode.rules_for(user, namespace);
            resources.extend(more_resources);
            paths.extend(more_paths);
            errors.extend(more_errors);
        }
        ((resources, paths), errors)
    }
}

impl Mode {
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Rules, Vec<String>) {
        use serde_json::json;
        let rules = match self {
            Mode::AlwaysAllow => (
                vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
                vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
            ),
            Mode::AlwaysDeny => (Vec::new(), Vec::new()),
            Mode::Rbac(store) => return store.rules_for(user, namespace),
            Mode::Abac(policies) => {
                let (mut resources, mut paths) = (Vec::new(), Vec::new());
                for policy in policies.iter().filter(|p| p.subject_matches(user)) {
                    let verbs = if policy.readonly {
                        json!(["get", "list", "watch"])
                    } else {
                        json!(["*"])
                    };
                    let in_namespace = policy.namespace == "*" || policy.namespace == namespace;
                    if in_namespace && !policy.resource.is_empty() {
                        resources.push(json!({"verbs": verbs, "apiGroups": [policy.api_group],
                            "resources": [policy.resource]}));
                    }
                    if !policy.non_resource_path.is_empty() {
                        paths.push(
                            json!({"verbs": verbs, "nonResourceURLs": [policy.non_resource_path]}),
                        );
                    }
                }
                (resources, paths)
            }
        };
        (rules, Vec::new())
    }
}

fn read_policies(path: &Path) -> Result<Vec<PolicySpec>, AuthConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| AuthConfigError::file(path, e))?;
    let mut policies = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at_line =
            |message: String| AuthConfigError::file(path, format!("line {}: {message}", i + 1));
        let policy: Policy = serde_json::from_str(line).map_err(|e| at_line(e.to_string()))?;
        if policy.api_version != POLICY_VERSION || policy.kind != "Policy" {
            return Err(at_line(format!("must be a {POLICY_VERSION} Policy")));
        }
        policies.push(policy.spec);
    }
    Ok(policies)
}

impl PolicySpec {
    fn matches(&self, user: &UserInfo, a: &Attributes) -> bool {
        self.subject_matches(user)
            && (a.read_only() || !self.readonly)
            && (self.resource_matches(a) || self.non_resource_matches(a))
    }

    fn subject_matches(&self, user: &UserInfo) -> bool {
        let mut matched = false;
        if !self.user.is_empty() {
            if self.user != "*" && self.user != user.name {
                return false;
            }
            matched = true;
        }
        if !self.group.is_empty() {
            if self.group != "*" && !user.groups.contains(&self.group) {
                return false;
            }
            matched = true;
        }
        matched
    }

    fn resource_matches(&self, a: &Attributes) -> bool {
        let any_or = |policy: &str, value: &str| policy == "*" || policy == value;
        a.resource_request
            && any_or(&self.namespace, &a.namespace)
            && any_or(&self.resource, &a.resource)
            && any_or(&self.api_group, &a.api_group)
    }

    fn non_resource_matches(&self, a: &Attributes) -> bool {
        let path = &self.non_resource_path;
        !a.resource_request
            && (path == "*"
                || *path == a.path
                || path.strip_suffix('*').is_some_and(|prefix| a.path.starts_with(prefix)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::Method;

    fn abac(lines: &[&str]) -> Authorizer {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        Authorizer::new("ABAC", Some(&path)).unwrap()
    }

    fn policy(spec: &str) -> String {
        format!(r#"{{"apiVersion": "{POLICY_VERSION}", "kind": "Policy", "spec": {spec}}}"#)
    }

    #[test]
    fn policies_match_as_kubernetes_abac_matches_them() {
        let authz = abac(&[
            &policy(
                r#"{"user": "alice", "namespace": "*", "resource": "*", "apiGroup": "*", "nonResourcePath": "*"}"#,
            ),
            &policy(
                r#"{"user": "bob", "namespace": "default", "resource": "pods", "apiGroup": "", "readonly": true}"#,
            ),
            &policy(
                r#"{"group": "system:unauthenticated", "nonResourcePath": "/healthz", "readonly": true}"#,
            ),
            &policy(r#"{"group": "readers", "nonResourcePath": "/api*", "readonly": true}"#),
        ]);
        let user = |name: &str, group: &str| UserInfo::authenticated(name, "", vec![group.into()]);
        let request = |method: Method, path: &str| Attributes::of(&method, path, "");
        let (alice, bob, reader) = (user("alice", "x"), user("bob", "x"), user("carol", "readers"));
        assert!(authz.allows(&alice, &request(Method::POST, "/api/v1/namespaces/a/secrets")));
        assert!(authz.allows(&alice, &request(Method::GET, "/version")));
        assert!(authz.allows(&bob, &request(Method::GET, "/api/v1/namespaces/default/pods")));
        assert!(
            !authz.allows(&bob, &request(Method::POST, "/api/v1/namespaces/default/pods")),
            "read only"
        );
        assert!(!authz.allows(&bob, &request(Method::GET, "/api/v1/namespaces/kube-system/pods")));
        assert!(!authz.allows(&bob, &request(Method::GET, "/api/v1/namespaces/default/configmaps")));
        assert!(!authz.allows(&bob, &request(Method::GET, "/healthz")), "a resource policy");
        assert!(authz.allows(&UserInfo::anonymous(), &request(Method::GET, "/healthz")));
        assert!(!authz.allows(&UserInfo::anonymous(), &request(Method::GET, "/livez")));
        assert!(authz.allows(&reader, &request(Method::GET, "/apis/apps/v1")));
        assert!(!authz.allows(&reader, &request(Method::GET, "/openapi/v3")));
    }

    #[test]
    fn system_masters_may_do_anything_whatever_the_modes() {
        let deny = Authorizer::new("AlwaysDeny", None).unwrap();
        let asked = Attributes {
            verb: "delete".into(),
            resource_request: true,
            resource: "nodes".into(),
            ..Attributes::default()
        };
        let root = UserInfo::authenticated("root", "", vec!["system:masters".into()]);
        let other = UserInfo::authenticated("alice", "", vec!["dev".into()]);
        assert!(deny.allows(&root, &asked));
        assert!(!deny.allows(&other, &asked));
    }

    #[test]
    fn bad_policy_files_and_modes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.jsonl");
        std::fs::write(&path, format!("{}\n{{\"user\": \"x\"}}\n", policy(r#"{"user": "a"}"#)))
            .unwrap();
        let error = Authorizer::new("ABAC", Some(&path)).unwrap_err();
        assert!(error.contains("line 2"), "{error}");
        assert!(Authorizer::new("Webhook", None).unwrap_err().contains("\"Webhook\""));
        let both = Authorizer::new("RBAC, AlwaysDeny", None).unwrap();
        assert!(both.rbac().is_some() && !both.always_allows());
        let anyone = UserInfo::authenticated("bob", "", vec![]);
        let asked = Attributes { verb: "get".into(), path: "/x".into(), ..Attributes::default() };
        assert_eq!(
            both.decide(&anyone, &asked),
            Decision { allowed: false, reason: "Everything is forbidden.".into() }
        );
        assert!(Authorizer::new("ABAC", None).is_err());
    }
}

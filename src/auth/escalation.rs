//! RBAC's escalation check, as Kubernetes' role and binding storage makes it: on the secure
//! port a user may write a Role or ClusterRole only with rules they hold themselves (in the
//! role's namespace; everywhere for a ClusterRole) unless they may `escalate` roles, and may
//! write a binding only to a role all of whose rules they hold (in the binding's namespace) or
//! that they may `bind`. So whoever may write roles or bindings still cannot give anyone, or
//! themselves, more than they have. The insecure port's writes are not checked.

use serde_json::Value;

use super::attributes::Attributes;
use super::authz::Authorizer;
use super::UserInfo;
use crate::error::HttpError;

/// The user whose writes are checked, and what decides what they hold.
pub struct Escalation<'a> {
    pub authorizer: &'a Authorizer,
    pub user: UserInfo,
}

/// Visits each permission a rule grants, as a request's attributes, until `visit` says stop
/// (a rule's lists multiply: a large one is never expanded whole).
fn each_permission(rule: &Value, namespace: &str, mut visit: impl FnMut(Attributes) -> bool) {
    let list = |key: &str| kplane_actors::model::json::strings(rule, key);
    let (verbs, urls, groups) = (list("verbs"), list("nonResourceURLs"), list("apiGroups"));
    let (resources, names) = (list("resources"), list("resourceNames"));
    let names = if names.is_empty() { vec![String::new()] } else { names };
    for verb in &verbs {
        for path in &urls {
            // In the namespace all the same: a URL rule of a ClusterRole bound there is held
            // to grant there (Kubernetes compares with the rules the user has in it).
            let asked = Attributes {
                verb: verb.clone(),
                path: path.clone(),
                namespace: namespace.to_string(),
                ..Attributes::default()
            };
            if !visit(asked) {
                return;
            }
        }
        for group in &groups {
            for resource in &resources {
                let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
                for name in &names {
                    let asked = Attributes {
                        verb: verb.clone(),
                        resource_request: true,
                        namespace: namespace.to_string(),
                        api_group: group.clone(),
                        resource: resource.to_string(),
                        subresource: subresource.to_string(),
                        name: name.clone(),
                        ..Attributes::default()
                    };
                    if !visit(asked) {
                        return;
                    }
                }
            }
        }
    }
}

/// Whether a ClusterRole aggregates: its aggregation rule has a selector (one without any
/// selects nothing, as Kubernetes counts it).
fn aggregates(role: &Value) -> bool {
    role.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|selectors| !selectors.is_empty())
}

/// Every permission: what only cluster-admin holds.
fn full_authority() -> [Value; 2] {
    [
        serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
        serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
    ]
}

/// How many missing permissions a refusal names (and the check looks for).
const MOST_MISSING: usize = 1000;
/// How many permissions one write's rules may expand to without `escalate` or `bind`.
const MOST_CHECKED: usize = 100_000;

/// A policy rule of missing permissions, as a refusal lists it.
#[derive(Debug, Default, PartialEq)]
struct MissingRule {
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    urls: Vec<String>,
    verbs: Vec<String>,
}

impl MissingRule {
    fn of(a: &Attributes) -> Self {
        let verbs = vec![a.verb.clone()];
        if !a.resource_request {
            return MissingRule { urls: vec![a.path.clone()], verbs, ..MissingRule::default() };
        }
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let names = if a.name.is_empty() { Vec::new() } else { vec![a.name.clone()] };
        MissingRule {
            groups: vec![a.api_group.clone()],
            resources: vec![resource],
            names,
            verbs,
            urls: Vec::new(),
        }
    }

    /// Go's `%q` of a list of strings: `["a" "b"]`.
    fn quoted(list: &[String]) -> String {
        let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", quoted.join(" "))
    }

    /// Kubernetes' `CompactString`: the rule's non-empty lists.
    fn compact(&self) -> String {
        let parts = [
            ("APIGroups", &self.groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.urls),
            ("ResourceNames", &self.names),
            ("Verbs", &self.verbs),
        ];
        let shown: Vec<String> = (parts.iter())
            .filter(|(_, list)| !list.is_empty())
            .map(|(name, list)| format!("{name}:{}", Self::quoted(list)))
            .collect();
        format!("{{{}}}", shown.join(", "))
    }

    /// The rule's Go `String()`, by which Kubernetes sorts the rules it lists.
    fn sort_key(&self) -> String {
        format!(
            "&PolicyRule{{Verbs:[{}],APIGroups:[{}],Resources:[{}],ResourceNames:[{}],NonResourceURLs:[{}],}}",
            self.verbs.join(" "),
            self.groups.join(" "),
            self.resources.join(" "),
            self.names.join(" "),
            self.urls.join(" ")
        )
    }
}

/// Missing permissions as Kubernetes lists them (`CompactRules`, then sorted by their text):
/// those of one group, resource and name (or none) that differ only by verb as one rule.
fn compacted(missing: &[Attributes]) -> Vec<String> {
    let mut rules: Vec<MissingRule> = Vec::new();
    for a in missing {
        let rule = MissingRule::of(a);
        let simple = rule.urls.is_empty();
        let same = |r: &&mut MissingRule| {
            r.urls.is_empty()
                && r.groups == rule.groups
                && r.resources == rule.resources
                && r.names == rule.names
        };
        match rules.iter_mut().find(same).filter(|_| simple) {
            Some(existing) => existing.verbs.extend(rule.verbs),
            None => rules.push(rule),
        }
    }
    rules.sort_by_cached_key(MissingRule::sort_key);
    // Listed as a set of their texts (Kubernetes' `sets.String`): sorted by the text itself.
    let texts: std::collections::BTreeSet<String> =
        rules.iter().map(MissingRule::compact).collect();
    texts.into_iter().collect()
}

impl Escalation<'_> {
    fn may(&self, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let asked = Attributes {
            verb: verb.into(),
            resource_request: true,
            namespace: namespace.into(),
            api_group: kplane_actors::model::resources::RBAC_GROUP.into(),
            resource: resource.into(),
            name: name.into(),
            ..Attributes::default()
        };
        self.authorizer.allows(&self.user, &asked)
    }

    /// Permissions of `rules` the user does not hold in `namespace` (empty: cluster-wide), the
    /// first [`MOST_MISSING`] of them, as a refusal lists them. Held means granted by RBAC
    /// (Kubernetes' `ConfirmNoEscalation` compares with the user's RBAC rules alone: what
    /// another mode, ABAC say, allows is not the user's to grant), or a member of
    /// `system:masters`.
    fn not_held(&self, rules: &[Value], namespace: &str) -> Vec<String> {
        let rbac = self.authorizer.rbac();
        let privileged = self.user.groups.iter().any(|g| g == super::authz::PRIVILEGED_GROUP);
        let holds = |asked: &Attributes| {
            privileged || rbac.as_ref().is_some_and(|rbac| rbac.decide(&self.user, asked).0)
        };
        let mut missing = Vec::new();
        let mut checked = 0;
        for rule in rules {
            each_permission(rule, namespace, |asked| {
                checked += 1;
                if checked > MOST_CHECKED {
                    return false;
                }
                if !holds(&asked) {
                    missing.push(asked);
                }
                missing.len() < MOST_MISSING
            });
            if missing.len() >= MOST_MISSING || checked > MOST_CHECKED {
                break;
            }
        }
        let mut listed = compacted(&missing);
        if checked > MOST_CHECKED {
            // Refused rather than checked for ever (the lists multiply).
            listed.push(format!("(more than {MOST_CHECKED} permissions to check)"));
        }
        listed
    }

    /// The refusal of a write granting `missing` in `namespace`; the bindings of the user's
    /// whose roles could not be found are named after them, as Kubernetes names them.
    fn refusal(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        missing: &[String],
    ) -> HttpError {
        let mut message = format!(
            "{resource}.rbac.authorization.k8s.io {name:?} is forbidden: user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            self.user.name,
            MissingRule::quoted(&self.user.groups),
            missing.join("\n")
        );
        let unresolved = self.authorizer.rbac().map(|rbac| rbac.rules_for(&self.user, namespace).1);
        if let Some(errors) = unresolved.filter(|errors| !errors.is_empty()) {
            message.push_str(&format!(
                "; resolution errors: [{}]",
                kplane_actors::core::aggregate(errors)
            ));
        }
        HttpError::Forbidden {
            message,
            kind: resource.into(),
            group: kplane_actors::model::resources::RBAC_GROUP.into(),
            name: name.into(),
        }
    }

    /// Checks a role (`roles`/`clusterroles`, `object` as it is to be stored, `stored` as it
    /// is before an update). A ClusterRole's aggregation rule gathers the rules of any role it
    /// selects, so setting, changing or dropping one takes every permission there is.
    pub fn check_role(
        &self,
        plural: &str,
        namespace: &str,
        object: &Value,
        stored: Option<&Value>,
    ) -> Result<(), HttpError> {
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        // Asked as the request is authorized: a create names no object (it is posted to the
        // collection), so an `escalate` limited to names covers updates only.
        let asked = if stored.is_some() { name } else { "" };
        if self.may("escalate", plural, namespace, asked) {
            return Ok(());
        }
        let rules = object.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
        let missing = self.not_held(&rules, namespace);
        if !missing.is_empty() {
            return Err(self.refusal(plural, namespace, name, &missing));
        }
        let aggregating = aggregates(object) || stored.is_some_and(aggregates);
        if aggregating && !self.not_held(&full_authority(), "").is_empty() {
            return Err(HttpError::Forbidden {
                message: format!(
                    "{plural}.rbac.authorization.k8s.io {name:?} is forbidden: must have \
                     cluster-admin privileges to use the aggregationRule"
                ),
                kind: plural.into(),
                group: kplane_actors::model::resources::RBAC_GROUP.into(),
                name: name.into(),
            });
        }
        Ok(())
    }

    /// Checks a binding to a role whose rules are `role_rules` (`None`: the role does not
    /// exist, which only someone who may `bind` it can bind).
    pub fn check_binding(
        &self,
        plural: &str,
        namespace: &str,
        object: &Value,
        role_rules: Option<&[Value]>,
    ) -> Result<(), HttpError> {
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let role_kind = object.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("");
        let role_name = object.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
        let role_plural = if role_kind == "Role" { "roles" } else { "clusterroles" };
        if self.may("bind", role_plural, namespace, role_name) {
            return Ok(());
        }
        let Some(rules) = role_rules else {
            // As Kubernetes' binding storage answers: the role's lookup fails, 404.
            let roles = kplane_actors::model::resources::find(
                kplane_actors::model::resources::RBAC_GROUP,
                "v1",
                role_plural,
            )
            .expect("the RBAC roles are served");
            return Err(HttpError::Api(kplane_actors::core::ApiError::not_found(roles, role_name)));
        };
        let missing = self.not_held(rules, namespace);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(self.refusal(plural, namespace, name, &missing))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_another_mode_allows_is_not_held_to_grant() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.jsonl");
        let line = r#"{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "resource": "nodes", "apiGroup": "*", "namespace": "*", "readonly": true}}"#;
        std::fs::write(&policy, line).unwrap();
        let authorizer = Authorizer::new("ABAC,RBAC", Some(&policy)).unwrap();
        let user = |groups: &[&str]| UserInfo {
            name: "bob".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            uid: String::new(),
            extra: Default::default(),
        };
        let role = json!({"metadata": {"name": "node-reader"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]});
        // ABAC lets bob read nodes, but RBAC gives him nothing to grant.
        let bob = Escalation { authorizer: &authorizer, user: user(&[]) };
        let refused = bob.check_role("clusterroles", "", &role, None);
        assert!(matches!(refused, Err(HttpError::Forbidden { .. })), "{refused:?}");
        let master = Escalation { authorizer: &authorizer, user: user(&["system:masters"]) };
        assert!(master.check_role("clusterroles", "", &role, None).is_ok());
    }

    #[test]
    fn a_rule_grants_each_of_its_verbs_on_each_of_its_resources() {
        let rule = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"],
            "resourceNames": ["web"]});
        let mut granted = Vec::new();
        each_permission(&rule, "team", |a| {
            granted.push(a);
            true
        });
        assert_eq!(granted.len(), 4);
        assert!(granted
            .iter()
            .any(|a| a.verb == "list" && a.subresource == "log" && a.name == "web"));
        let mut urls = Vec::new();
        each_permission(&json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}), "", |a| {
            urls.push(a);
            true
        });
        assert_eq!(compacted(&urls), ["{NonResourceURLs:[\"/healthz\"], Verbs:[\"get\"]}"]);
        // Verbs of one group, resource and name are one rule; rules sort by their text
        // (`"pods"]` before `"pods/log"]`, as Go compares the strings of a set).
        assert_eq!(
            compacted(&granted),
            [
                "{APIGroups:[\"\"], Resources:[\"pods\"], ResourceNames:[\"web\"], Verbs:[\"get\" \"list\"]}",
                "{APIGroups:[\"\"], Resources:[\"pods/log\"], ResourceNames:[\"web\"], Verbs:[\"get\" \"list\"]}",
            ]
        );
        // A huge rule is walked only as far as asked.
        let many: Vec<String> = (0..1000).map(|i| format!("r{i}")).collect();
        let huge =
            json!({"verbs": many, "apiGroups": many, "resources": many, "resourceNames": many});
        let mut seen = 0;
        each_permission(&huge, "team", |_| {
            seen += 1;
            seen < 10
        });
        assert_eq!(seen, 10);
    }
}

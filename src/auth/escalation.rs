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

/// One permission a rule grants, as a request's attributes.
fn permissions(rule: &Value, namespace: &str) -> Vec<Attributes> {
    let list = |key: &str| -> Vec<String> {
        let items = rule.get(key).and_then(Value::as_array).into_iter().flatten();
        items.filter_map(Value::as_str).map(String::from).collect()
    };
    let (verbs, urls) = (list("verbs"), list("nonResourceURLs"));
    let mut granted = Vec::new();
    for verb in &verbs {
        for path in &urls {
            granted.push(Attributes {
                verb: verb.clone(),
                path: path.clone(),
                ..Attributes::default()
            });
        }
        for group in list("apiGroups") {
            for resource in list("resources") {
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, s)) => (r.to_string(), s.to_string()),
                    None => (resource, String::new()),
                };
                let names = list("resourceNames");
                let names = if names.is_empty() { vec![String::new()] } else { names };
                for name in names {
                    granted.push(Attributes {
                        verb: verb.clone(),
                        resource_request: true,
                        namespace: namespace.to_string(),
                        api_group: group.clone(),
                        resource: resource.clone(),
                        subresource: subresource.clone(),
                        name,
                        ..Attributes::default()
                    });
                }
            }
        }
    }
    granted
}

fn describe(a: &Attributes) -> String {
    if !a.resource_request {
        return format!("{{NonResourceURLs:[{:?}], Verbs:[{:?}]}}", a.path, a.verb);
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let names =
        if a.name.is_empty() { String::new() } else { format!(", ResourceNames:[{:?}]", a.name) };
    format!(
        "{{APIGroups:[{:?}], Resources:[{resource:?}]{names}, Verbs:[{:?}]}}",
        a.api_group, a.verb
    )
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

    /// The rules of `rules` the user does not hold in `namespace` (empty: cluster-wide).
    fn not_held(&self, rules: &[Value], namespace: &str) -> Vec<String> {
        let granted = rules.iter().flat_map(|rule| permissions(rule, namespace));
        granted.filter(|p| !self.authorizer.allows(&self.user, p)).map(|p| describe(&p)).collect()
    }

    fn refusal(&self, resource: &str, name: &str, missing: &[String]) -> HttpError {
        let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
        let message = format!(
            "{resource}.rbac.authorization.k8s.io {name:?} is forbidden: user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
            self.user.name,
            self.user.groups,
            shown.join("\n")
        );
        HttpError::Forbidden {
            message,
            kind: resource.into(),
            group: kplane_actors::model::resources::RBAC_GROUP.into(),
            name: name.into(),
        }
    }

    /// Checks a role (`roles`/`clusterroles`, `object` as it is to be stored).
    pub fn check_role(
        &self,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<(), HttpError> {
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        if self.may("escalate", plural, namespace, name) {
            return Ok(());
        }
        let rules = object.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
        let missing = self.not_held(&rules, namespace);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(self.refusal(plural, name, &missing))
        }
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
        let missing = match role_rules {
            Some(rules) => self.not_held(rules, namespace),
            None => vec![format!("(the {role_kind} {role_name:?} does not exist)")],
        };
        if missing.is_empty() {
            Ok(())
        } else {
            Err(self.refusal(plural, name, &missing))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_grants_each_of_its_verbs_on_each_of_its_resources() {
        let rule = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"],
            "resourceNames": ["web"]});
        let granted = permissions(&rule, "team");
        assert_eq!(granted.len(), 4);
        assert!(granted
            .iter()
            .any(|a| a.verb == "list" && a.subresource == "log" && a.name == "web"));
        let urls = permissions(&json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}), "");
        assert_eq!(describe(&urls[0]), "{NonResourceURLs:[\"/healthz\"], Verbs:[\"get\"]}");
    }
}

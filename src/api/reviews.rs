//! The reviews of `authentication.k8s.io` and `authorization.k8s.io`: questions asked by
//! creating an object and answered in its `status`, nothing stored (`kubectl auth whoami`,
//! `kubectl auth can-i`, and the access checks controllers and proxies make).
//!
//! On the insecure port, as on kube-apiserver's, every request is the user `system:unsecured`
//! of the groups `system:masters` and `system:authenticated`, and every request is allowed:
//! the answers say exactly that. A request there that impersonates someone (`Impersonate-User`,
//! as `kubectl --as` sends it) is that user, authorized as such. On the secure port the user
//! is the one authenticated (or impersonated). For an authorized user the access and rules
//! reviews are the authorizer's answers (`kubectl auth can-i`, `kubectl auth can-i --list`),
//! as are, on either port, the access reviews that name the user they ask about
//! (`subjectaccessreviews`, `localsubjectaccessreviews`).

use actix_web::HttpRequest;
use chrono::{SecondsFormat, Utc};
use kplane_actors::core::ApiError;
use kplane_actors::model::{FieldError, ResourceType};
use serde_json::{json, Map, Value};

use crate::auth::attributes::Attributes;
use crate::auth::authz::Authorizer;
use crate::auth::UserInfo;
use crate::error::HttpError;

/// Who a request is, as a SelfSubjectReview's `userInfo` says it: the user it was authorized
/// as (the secure port's, or whom it impersonates), else the insecure port's
/// `system:unsecured`.
pub fn user_info(req: &HttpRequest) -> Value {
    use actix_web::HttpMessage;
    if let Some(crate::auth::filter::RequestUser(user)) = req.extensions().get() {
        return user.to_json();
    }
    UserInfo::unsecured().to_json()
}

/// Answers the review `review` of `resource`, created in `namespace` (for the namespaced
/// `localsubjectaccessreviews`): the object with its `status`, or why it cannot be answered.
pub fn answer(
    resource: &'static ResourceType,
    namespace: &str,
    user: Value,
    authorizer: Option<&Authorizer>,
    review: Value,
) -> Result<Value, HttpError> {
    let mut review = kplane_actors::core::addressed_object(resource, namespace, review)?;
    let Some(object) = review.as_object_mut() else {
        return Err(HttpError::BadRequest("a review must be an object".into()));
    };
    let errors = validate(resource.kind, namespace, object);
    if !errors.is_empty() {
        return Err(ApiError::invalid(resource, "", errors).into());
    }
    let status = match resource.kind {
        "SelfSubjectReview" => {
            // A new object, whatever was sent, as Kubernetes answers it.
            let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
            object.insert("metadata".into(), json!({"creationTimestamp": now}));
            json!({"userInfo": user})
        }
        "SelfSubjectRulesReview" => {
            let asked = object.get("spec").and_then(|s| s.get("namespace")).and_then(Value::as_str);
            if asked.is_none_or(str::is_empty) {
                return Err(HttpError::BadRequest("no namespace on request".into()));
            }
            let asked = asked.unwrap_or("").to_string();
            // A new object holding the answer alone, as Kubernetes answers it.
            object.insert("metadata".into(), json!({}));
            object.insert("spec".into(), json!({}));
            match authorizer {
                Some(authorizer) => {
                    let ((resource_rules, non_resource_rules), errors) =
                        authorizer.rules_for(&subject(&user), &asked);
                    let mut status = json!({"resourceRules": resource_rules,
                        "nonResourceRules": non_resource_rules, "incomplete": false});
                    // The bindings whose roles are missing, as Kubernetes aggregates errors.
                    if !errors.is_empty() {
                        status["evaluationError"] = json!(kplane_actors::core::aggregate(errors));
                    }
                    status
                }
                None => json!({
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                }),
            }
        }
        // The access reviews: the authorizer's answer on the secure port; on the insecure one
        // anyone may do anything.
        kind => match authorizer {
            Some(authorizer) => {
                let spec = object.get("spec").cloned().unwrap_or(Value::Null);
                let asker = if kind == "SelfSubjectAccessReview" {
                    subject(&user)
                } else {
                    subject(&json!({"username": spec["user"], "uid": spec["uid"],
                        "groups": spec["groups"]}))
                };
                let decision = authorizer.decide(&asker, &asked_attributes(&spec));
                let mut status = json!({"allowed": decision.allowed});
                if !decision.reason.is_empty() {
                    status["reason"] = json!(decision.reason);
                }
                status
            }
            None => json!({"allowed": true}),
        },
    };
    let meta = metadata(object);
    meta.entry("creationTimestamp").or_insert(Value::Null);
    object.insert("status".into(), status);
    Ok(review)
}

/// The user a review's `userInfo` (or a SubjectAccessReview's spec) names.
fn subject(user: &Value) -> UserInfo {
    let text = |key: &str| user.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let groups = kplane_actors::model::json::strings(user, "groups");
    let extras = user.get("extra").and_then(Value::as_object).into_iter().flatten();
    let strings = |values: &Value| -> Vec<String> {
        let items = values.as_array().into_iter().flatten();
        items.filter_map(Value::as_str).map(String::from).collect()
    };
    let extra = extras.map(|(key, values)| (key.clone(), strings(values))).collect();
    UserInfo { name: text("username"), uid: text("uid"), groups, extra }
}

/// The request an access review asks about.
fn asked_attributes(spec: &Value) -> Attributes {
    let text =
        |value: &Value, key: &str| value.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    match spec.get("resourceAttributes").filter(|a| a.is_object()) {
        Some(r) => Attributes {
            verb: text(r, "verb"),
            resource_request: true,
            namespace: text(r, "namespace"),
            api_group: text(r, "group"),
            api_version: text(r, "version"),
            resource: text(r, "resource"),
            subresource: text(r, "subresource"),
            name: text(r, "name"),
            path: String::new(),
        },
        None => {
            let n = spec.get("nonResourceAttributes").cloned().unwrap_or(Value::Null);
            Attributes { verb: text(&n, "verb"), path: text(&n, "path"), ..Attributes::default() }
        }
    }
}

fn metadata(object: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = object.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("made an object")
}

/// Kubernetes' validation of the access reviews (the other reviews have no spec to check).
fn validate(kind: &str, namespace: &str, review: &Map<String, Value>) -> Vec<FieldError> {
    let access = matches!(
        kind,
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview"
    );
    if !access {
        return Vec::new();
    }
    let mut errors = Vec::new();
    let meta = review.get("metadata").and_then(Value::as_object);
    let allowed = |key: &str| kind == "LocalSubjectAccessReview" && key == "namespace";
    // Empty values are unset, as Kubernetes' semantic comparison has them.
    let is_set = |value: &Value| match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Bool(true) => true,
    };
    let meta_set = meta.into_iter().flatten().filter(|(key, value)| is_set(value) && !allowed(key));
    if meta_set.count() > 0 {
        let detail = match kind {
            "LocalSubjectAccessReview" => "must be empty except for namespace",
            _ => "must be empty",
        };
        errors.push(FieldError::invalid("metadata", "", detail));
    }
    let spec = review.get("spec");
    let attributes = |name: &str| spec.and_then(|s| s.get(name)).filter(|a| !a.is_null());
    let (resource, non_resource) =
        (attributes("resourceAttributes"), attributes("nonResourceAttributes"));
    match (resource, non_resource) {
        (Some(_), Some(_)) => errors.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            "",
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => errors.push(FieldError::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if let Some(attributes) = resource {
        let path = "spec.resourceAttributes";
        errors.extend(kplane_actors::model::validation::validate_selector_attributes(
            attributes, path,
        ));
    }
    if kind != "SelfSubjectAccessReview" {
        let user = spec.and_then(|s| s.get("user")).and_then(Value::as_str).unwrap_or("");
        let groups = spec.and_then(|s| s.get("groups")).and_then(Value::as_array);
        if user.is_empty() && groups.is_none_or(Vec::is_empty) {
            errors.push(FieldError::invalid(
                "spec.user",
                "",
                "at least one of user or group must be specified",
            ));
        }
    }
    if kind == "LocalSubjectAccessReview" {
        if non_resource.is_some() {
            errors.push(FieldError::invalid(
                "spec.nonResourceAttributes",
                "",
                "disallowed on this kind of request",
            ));
        }
        let asked = resource.and_then(|r| r.get("namespace")).and_then(Value::as_str).unwrap_or("");
        if resource.is_some() && asked != namespace {
            errors.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                asked,
                "must match metadata.namespace",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use kplane_actors::model::resources;

    use super::*;

    fn review(plural: &str) -> &'static ResourceType {
        let group = if plural == "selfsubjectreviews" {
            "authentication.k8s.io"
        } else {
            "authorization.k8s.io"
        };
        resources::find(group, "v1", plural).unwrap()
    }

    fn insecure() -> Value {
        user_info(&actix_web::test::TestRequest::default().to_http_request())
    }

    #[test]
    fn an_impersonating_request_is_the_user_it_names() {
        let as_user = |headers: &[(&str, &str)]| {
            let mut req = actix_web::test::TestRequest::default();
            for header in headers {
                req = req.append_header(*header);
            }
            let req = req.to_http_request();
            let impersonation = crate::auth::impersonation::requested(req.headers());
            impersonation.unwrap().expect("an impersonation").user.to_json()
        };
        assert_eq!(
            as_user(&[("Impersonate-User", "bob")]),
            json!({"username": "bob", "groups": ["system:authenticated"]})
        );
        let grouped = as_user(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Uid", "u1"),
            ("Impersonate-Extra-Scope%2Fa", "x"),
        ]);
        assert_eq!(
            grouped,
            json!({"username": "bob", "uid": "u1",
            "groups": ["dev", "ops", "system:authenticated"], "extra": {"scope/a": ["x"]}})
        );
        let account = as_user(&[("Impersonate-User", "system:serviceaccount:team:robot")]);
        assert_eq!(
            account["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:team",
                "system:authenticated"
            ])
        );
        assert_eq!(
            as_user(&[("Impersonate-User", "system:anonymous")])["groups"],
            json!(["system:unauthenticated"])
        );
    }

    fn causes(result: Result<Value, HttpError>) -> Vec<String> {
        match result {
            Err(HttpError::Api(ApiError::Invalid { causes, .. })) => {
                causes.into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
            }
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn everyone_is_the_insecure_ports_superuser_and_may_do_anything() {
        let who = answer(review("selfsubjectreviews"), "", insecure(), None, json!({})).unwrap();
        assert_eq!(
            who["status"]["userInfo"],
            json!({"username": "system:unsecured", "groups": ["system:masters", "system:authenticated"]})
        );
        assert!(who["metadata"]["creationTimestamp"].is_string());

        let ask = json!({"spec": {"resourceAttributes": {"verb": "create", "resource": "pods",
            "namespace": "default"}}});
        let answered =
            answer(review("selfsubjectaccessreviews"), "", insecure(), None, ask.clone()).unwrap();
        assert_eq!(answered["status"], json!({"allowed": true}));
        assert_eq!(answered["spec"], ask["spec"], "the question is given back");
        assert_eq!(answered["metadata"], json!({"creationTimestamp": null}));

        let rules = json!({"spec": {"namespace": "default"}});
        let answered =
            answer(review("selfsubjectrulesreviews"), "", insecure(), None, rules).unwrap();
        assert_eq!(answered["status"]["resourceRules"][0]["verbs"], json!(["*"]));
        assert_eq!(answered["status"]["incomplete"], false);
        let no_namespace =
            answer(review("selfsubjectrulesreviews"), "", insecure(), None, json!({"spec": {}}));
        assert!(
            matches!(no_namespace, Err(HttpError::BadRequest(m)) if m == "no namespace on request")
        );

        let local = json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "team",
            "verb": "get", "resource": "pods"}}});
        let answered =
            answer(review("localsubjectaccessreviews"), "team", insecure(), None, local).unwrap();
        assert_eq!(
            (answered["status"]["allowed"].clone(), answered["metadata"]["namespace"].clone()),
            (json!(true), json!("team"))
        );
    }

    #[test]
    fn on_the_secure_port_the_authorizer_answers() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.jsonl");
        let line = r#"{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
            "spec": {"user": "bob", "namespace": "team", "resource": "pods", "apiGroup": "", "readonly": true}}"#;
        std::fs::write(&policy, line.replace('\n', " ")).unwrap();
        let abac = Authorizer::new("ABAC", Some(&policy)).unwrap();
        let bob = json!({"username": "bob", "groups": ["system:authenticated"]});
        let ask = |verb: &str, namespace: &str| {
            let body = json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "pods",
                "namespace": namespace}}});
            let answered =
                answer(review("selfsubjectaccessreviews"), "", bob.clone(), Some(&abac), body);
            answered.unwrap()["status"].clone()
        };
        assert_eq!(ask("list", "team"), json!({"allowed": true}));
        assert_eq!(
            ask("create", "team"),
            json!({"allowed": false, "reason": "No policy matched."})
        );
        assert_eq!(ask("list", "other")["allowed"], false);
        // Another subject's question, by its spec.
        let for_alice = json!({"spec": {"user": "alice", "resourceAttributes": {"verb": "list",
            "resource": "pods", "namespace": "team"}}});
        let answered =
            answer(review("subjectaccessreviews"), "", bob.clone(), Some(&abac), for_alice);
        assert_eq!(answered.unwrap()["status"]["allowed"], false);
        let rules = json!({"spec": {"namespace": "team"}});
        let answered =
            answer(review("selfsubjectrulesreviews"), "", bob, Some(&abac), rules).unwrap();
        assert_eq!(
            answered["status"]["resourceRules"],
            json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}])
        );
    }

    #[test]
    fn a_review_is_the_object_its_url_names() {
        let ask = json!({"metadata": {"name": "", "labels": {}},
            "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}});
        let answered =
            answer(review("selfsubjectaccessreviews"), "", insecure(), None, ask).unwrap();
        assert_eq!(
            (answered["kind"].as_str(), answered["apiVersion"].as_str()),
            (Some("SelfSubjectAccessReview"), Some("authorization.k8s.io/v1"))
        );
        let pod = json!({"kind": "Pod", "spec": {}});
        let refused = answer(review("selfsubjectaccessreviews"), "", insecure(), None, pod);
        assert!(matches!(refused, Err(HttpError::Api(ApiError::BadRequest(_)))));
        let elsewhere = json!({"metadata": {"namespace": "other"}, "spec": {"user": "u",
            "resourceAttributes": {"namespace": "team"}}});
        let refused =
            answer(review("localsubjectaccessreviews"), "team", insecure(), None, elsewhere);
        assert!(matches!(refused, Err(HttpError::Api(ApiError::BadRequest(_)))));
        let sent = json!({"metadata": {"labels": {"a": "b"}}});
        let who = answer(review("selfsubjectreviews"), "", insecure(), None, sent).unwrap();
        assert!(who["metadata"].get("labels").is_none(), "a new object: {who}");
    }

    #[test]
    fn access_reviews_are_validated_as_kubernetes_does() {
        let asked = |plural: &str, namespace: &str, body: Value| {
            causes(answer(review(plural), namespace, insecure(), None, body))
        };
        assert_eq!(
            asked("selfsubjectaccessreviews", "", json!({"spec": {}})),
            ["spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"]
        );
        let both = json!({"metadata": {"name": "x"}, "spec": {"resourceAttributes": {},
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}});
        assert_eq!(
            asked("selfsubjectaccessreviews", "", both),
            [
                "metadata: Invalid value: \"\": must be empty",
                "spec.nonResourceAttributes: Invalid value: \"\": cannot be specified in combination with resourceAttributes",
            ]
        );
        let nobody = json!({"spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
        assert_eq!(
            asked("subjectaccessreviews", "", nobody),
            ["spec.user: Invalid value: \"\": at least one of user or group must be specified"]
        );
        let elsewhere =
            json!({"spec": {"groups": ["g"], "resourceAttributes": {"namespace": "other"}}});
        assert_eq!(
            asked("localsubjectaccessreviews", "team", elsewhere),
            ["spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"]
        );
        // Selectors, as Kubernetes checks them (an operator it does not know let through).
        let selecting = json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "pods",
            "fieldSelector": {"rawSelector": "a=b", "requirements": [
                {"key": "", "operator": "In", "values": []},
                {"key": "k", "operator": "Newer", "values": []}]},
            "labelSelector": {}}}});
        assert_eq!(
            asked("selfsubjectaccessreviews", "", selecting),
            [
                "spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: \"a=b\": may not specified at the same time as requirements",
                "spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be specified",
                "spec.resourceAttributes.fieldSelector.requirements[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.resourceAttributes.labelSelector.requirements: Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required",
            ]
        );
    }
}

//! The reviews of `authentication.k8s.io` and `authorization.k8s.io`: questions asked by
//! creating an object and answered in its `status`, nothing stored (`kubectl auth whoami`,
//! `kubectl auth can-i`, and the access checks controllers and proxies make).
//!
//! kplane serves its API on the insecure port only, as kube-apiserver's insecure port did:
//! every request is the user `system:unsecured` of the groups `system:masters` and
//! `system:authenticated`, as that port authenticated them, and every request is allowed, as
//! the `AlwaysAllow` authorizer allows them. The answers say exactly that.

use chrono::{SecondsFormat, Utc};
use kplane_actors::core::ApiError;
use kplane_actors::model::{FieldError, ResourceType};
use serde_json::{json, Map, Value};

use crate::error::HttpError;

/// Who a request on the insecure port is.
const USER: &str = "system:unsecured";
const GROUPS: &[&str] = &["system:masters", "system:authenticated"];

/// Answers the review `review` of `resource`, created in `namespace` (for the namespaced
/// `localsubjectaccessreviews`): the object with its `status`, or why it cannot be answered.
pub fn answer(
    resource: &'static ResourceType,
    namespace: &str,
    mut review: Value,
) -> Result<Value, HttpError> {
    let Some(object) = review.as_object_mut() else {
        return Err(HttpError::BadRequest("a review must be an object".into()));
    };
    let errors = validate(resource.kind, namespace, object);
    if !errors.is_empty() {
        return Err(ApiError::invalid(resource, "", errors).into());
    }
    let status = match resource.kind {
        "SelfSubjectReview" => {
            let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
            metadata(object).insert("creationTimestamp".into(), json!(now));
            json!({"userInfo": {"username": USER, "groups": GROUPS}})
        }
        "SelfSubjectRulesReview" => {
            let asked = object.get("spec").and_then(|s| s.get("namespace")).and_then(Value::as_str);
            if asked.is_none_or(str::is_empty) {
                return Err(HttpError::BadRequest("no namespace on request".into()));
            }
            json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            })
        }
        // The access reviews: anyone may do anything.
        _ => json!({"allowed": true}),
    };
    if resource.namespaced {
        metadata(object).insert("namespace".into(), json!(namespace));
    }
    let meta = metadata(object);
    meta.entry("creationTimestamp").or_insert(Value::Null);
    object.insert("status".into(), status);
    Ok(review)
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
    let meta_set =
        meta.into_iter().flatten().filter(|(key, value)| !value.is_null() && !allowed(key));
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
        let who = answer(review("selfsubjectreviews"), "", json!({})).unwrap();
        assert_eq!(
            who["status"]["userInfo"],
            json!({"username": "system:unsecured", "groups": ["system:masters", "system:authenticated"]})
        );
        assert!(who["metadata"]["creationTimestamp"].is_string());

        let ask = json!({"spec": {"resourceAttributes": {"verb": "create", "resource": "pods",
            "namespace": "default"}}});
        let answered = answer(review("selfsubjectaccessreviews"), "", ask.clone()).unwrap();
        assert_eq!(answered["status"], json!({"allowed": true}));
        assert_eq!(answered["spec"], ask["spec"], "the question is given back");
        assert_eq!(answered["metadata"], json!({"creationTimestamp": null}));

        let rules = json!({"spec": {"namespace": "default"}});
        let answered = answer(review("selfsubjectrulesreviews"), "", rules).unwrap();
        assert_eq!(answered["status"]["resourceRules"][0]["verbs"], json!(["*"]));
        assert_eq!(answered["status"]["incomplete"], false);
        let no_namespace = answer(review("selfsubjectrulesreviews"), "", json!({"spec": {}}));
        assert!(
            matches!(no_namespace, Err(HttpError::BadRequest(m)) if m == "no namespace on request")
        );

        let local = json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "team",
            "verb": "get", "resource": "pods"}}});
        let answered = answer(review("localsubjectaccessreviews"), "team", local).unwrap();
        assert_eq!(
            (answered["status"]["allowed"].clone(), answered["metadata"]["namespace"].clone()),
            (json!(true), json!("team"))
        );
    }

    #[test]
    fn access_reviews_are_validated_as_kubernetes_does() {
        let asked = |plural: &str, namespace: &str, body: Value| {
            causes(answer(review(plural), namespace, body))
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
    }
}

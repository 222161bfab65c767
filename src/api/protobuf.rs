//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).
//!
//! kubectl's generators (`create namespace|configmap|secret|service|serviceaccount`, `run`) send
//! objects as the 4-byte magic `k8s\0` followed by a `runtime.Unknown` envelope whose `raw`
//! field holds the typed message. This module owns unwrapping that envelope, decoding the
//! typed message with the `k8s-pb` bindings, and converting it to the Kubernetes JSON form the
//! rest of the server works with (unset and empty optional fields omitted).

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::api::policy::v1 as policyv1;
use k8s_pb::api::rbac::v1 as rbacv1;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{DeleteOptions, LabelSelector, ObjectMeta};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{json, Map, Value};

/// The magic prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Decodes a Kubernetes protobuf body into the object's JSON form.
///
/// Supports core/v1 Namespace, ConfigMap, Secret, Service, ServiceAccount, ResourceQuota,
/// Pod (the common fields of the latter), policy/v1 PodDisruptionBudget and Eviction, the RBAC
/// kinds, the reviews, and DeleteOptions. Returns `Err` with a human-readable message for a missing magic,
/// malformed bytes, a content encoding, or an unsupported kind.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| "protobuf body does not start with the k8s magic prefix".to_string())?;
    let unknown = Unknown::decode(rest).map_err(|e| format!("malformed protobuf envelope: {e}"))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if let Some(enc) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(format!("unsupported protobuf content encoding {enc:?}"));
    }
    let raw = unknown.raw.unwrap_or_default();
    let bad = |e: prost::DecodeError| format!("malformed protobuf {kind} object: {e}");
    let mut out = Map::new();
    out.insert("kind".into(), json!(kind));
    out.insert("apiVersion".into(), json!(api_version));
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => {
            let ns = pb::Namespace::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(ns.metadata));
            let mut spec = Map::new();
            if let Some(s) = ns.spec {
                put_strs(&mut spec, "finalizers", s.finalizers);
            }
            out.insert("spec".into(), Value::Object(spec));
        }
        ("v1", "ConfigMap") => {
            let cm = pb::ConfigMap::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(cm.metadata));
            put_bool(&mut out, "immutable", cm.immutable);
            put_map(&mut out, "data", cm.data);
            put_bytes_map(&mut out, "binaryData", cm.binary_data);
        }
        ("v1", "Secret") => {
            let secret = pb::Secret::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(secret.metadata));
            put_bool(&mut out, "immutable", secret.immutable);
            put_bytes_map(&mut out, "data", secret.data);
            put_map(&mut out, "stringData", secret.string_data);
            put_str(&mut out, "type", secret.r#type);
        }
        ("v1", "Service") => {
            let svc = pb::Service::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(svc.metadata));
            out.insert("spec".into(), service_spec(svc.spec.unwrap_or_default()));
        }
        ("v1", "ServiceAccount") => {
            let sa = pb::ServiceAccount::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(sa.metadata));
            let secrets: Vec<Value> = sa.secrets.into_iter().map(object_reference).collect();
            if !secrets.is_empty() {
                out.insert("secrets".into(), Value::Array(secrets));
            }
            put_local_refs(&mut out, "imagePullSecrets", sa.image_pull_secrets);
            put_bool(&mut out, "automountServiceAccountToken", sa.automount_service_account_token);
        }
        ("v1", "ResourceQuota") => {
            let quota = pb::ResourceQuota::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(quota.metadata));
            out.insert("spec".into(), quota_spec(quota.spec.unwrap_or_default()));
        }
        ("v1", "Pod") => {
            let pod = pb::Pod::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(pod.metadata));
            out.insert("spec".into(), pod_spec(pod.spec.unwrap_or_default()));
        }
        // What `kubectl create role|clusterrole|rolebinding|clusterrolebinding` sends.
        ("rbac.authorization.k8s.io/v1", "Role") => {
            let role = rbacv1::Role::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(role.metadata));
            out.insert("rules".into(), policy_rules(role.rules));
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            let role = rbacv1::ClusterRole::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(role.metadata));
            out.insert("rules".into(), policy_rules(role.rules));
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            let binding = rbacv1::RoleBinding::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(binding.metadata));
            put_binding(&mut out, binding.subjects, binding.role_ref);
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            let binding = rbacv1::ClusterRoleBinding::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(binding.metadata));
            put_binding(&mut out, binding.subjects, binding.role_ref);
        }
        // The reviews kubectl asks (`auth whoami`, `auth can-i`), and the other access reviews.
        ("authentication.k8s.io/v1", "TokenRequest") => {
            let request = authnv1::TokenRequest::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(request.metadata));
            let spec = request.spec.unwrap_or_default();
            let mut out_spec = Map::new();
            put_strs(&mut out_spec, "audiences", spec.audiences);
            if let Some(seconds) = spec.expiration_seconds {
                out_spec.insert("expirationSeconds".into(), json!(seconds));
            }
            out.insert("spec".into(), Value::Object(out_spec));
        }
        ("authentication.k8s.io/v1", "TokenReview") => {
            let review = authnv1::TokenReview::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(review.metadata));
            let spec = review.spec.unwrap_or_default();
            let mut out_spec = Map::new();
            put_str(&mut out_spec, "token", spec.token);
            put_strs(&mut out_spec, "audiences", spec.audiences);
            out.insert("spec".into(), Value::Object(out_spec));
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            let review = authnv1::SelfSubjectReview::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(review.metadata));
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            let review = authzv1::SelfSubjectAccessReview::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(review.metadata));
            let spec = review.spec.unwrap_or_default();
            let spec = access_spec(spec.resource_attributes, spec.non_resource_attributes);
            out.insert("spec".into(), Value::Object(spec));
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            let review = authzv1::SelfSubjectRulesReview::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(review.metadata));
            let mut spec = Map::new();
            put_str(&mut spec, "namespace", review.spec.unwrap_or_default().namespace);
            out.insert("spec".into(), Value::Object(spec));
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => {
            let review = authzv1::SubjectAccessReview::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(review.metadata));
            out.insert("spec".into(), subject_access_spec(review.spec.unwrap_or_default()));
        }
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            let review = authzv1::LocalSubjectAccessReview::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(review.metadata));
            out.insert("spec".into(), subject_access_spec(review.spec.unwrap_or_default()));
        }
        // A delete's options (kubectl drain sends them so where pods have no eviction).
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => {
            let options = DeleteOptions::decode(raw.as_slice()).map_err(bad)?;
            delete_options(&mut out, options);
        }
        // What kubectl drain sends to evict a pod.
        ("policy/v1", "Eviction") => {
            let eviction = policyv1::Eviction::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(eviction.metadata));
            if let Some(options) = eviction.delete_options {
                let mut fields = Map::new();
                delete_options(&mut fields, options);
                out.insert("deleteOptions".into(), Value::Object(fields));
            }
        }
        ("policy/v1", "PodDisruptionBudget") => {
            let budget = policyv1::PodDisruptionBudget::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), meta(budget.metadata));
            let mut spec = Map::new();
            if let Some(s) = budget.spec {
                if let Some(min) = s.min_available {
                    spec.insert("minAvailable".into(), int_or_string(min));
                }
                if let Some(max) = s.max_unavailable {
                    spec.insert("maxUnavailable".into(), int_or_string(max));
                }
                if let Some(selector) = s.selector {
                    spec.insert("selector".into(), label_selector(selector));
                }
                put_str(&mut spec, "unhealthyPodEvictionPolicy", s.unhealthy_pod_eviction_policy);
            }
            out.insert("spec".into(), Value::Object(spec));
        }
        _ => {
            return Err(format!(
                "protobuf bodies of kind {kind:?} in {api_version:?} are not supported; send JSON or YAML"
            ))
        }
    }
    Ok(Value::Object(out))
}

/// An access review's question: what is done to which resource, or to which other path.
fn access_spec(
    resource: Option<authzv1::ResourceAttributes>,
    non_resource: Option<authzv1::NonResourceAttributes>,
) -> Map<String, Value> {
    let mut spec = Map::new();
    if let Some(r) = resource {
        let mut attributes = Map::new();
        put_str(&mut attributes, "namespace", r.namespace);
        put_str(&mut attributes, "verb", r.verb);
        put_str(&mut attributes, "group", r.group);
        put_str(&mut attributes, "version", r.version);
        put_str(&mut attributes, "resource", r.resource);
        put_str(&mut attributes, "subresource", r.subresource);
        put_str(&mut attributes, "name", r.name);
        for (key, selector) in [
            ("fieldSelector", r.field_selector.and_then(|f| f.raw_selector)),
            ("labelSelector", r.label_selector.and_then(|l| l.raw_selector)),
        ] {
            if let Some(raw) = selector.filter(|raw| !raw.is_empty()) {
                attributes.insert(key.into(), json!({"rawSelector": raw}));
            }
        }
        spec.insert("resourceAttributes".into(), Value::Object(attributes));
    }
    if let Some(n) = non_resource {
        let mut attributes = Map::new();
        put_str(&mut attributes, "path", n.path);
        put_str(&mut attributes, "verb", n.verb);
        spec.insert("nonResourceAttributes".into(), Value::Object(attributes));
    }
    spec
}

/// A (local) subject access review's question, with the subject it is asked of.
fn subject_access_spec(spec: authzv1::SubjectAccessReviewSpec) -> Value {
    let mut out = access_spec(spec.resource_attributes, spec.non_resource_attributes);
    put_str(&mut out, "user", spec.user);
    put_strs(&mut out, "groups", spec.groups);
    put_str(&mut out, "uid", spec.uid);
    let extra: Map<String, Value> =
        spec.extra.into_iter().map(|(key, values)| (key, json!(values.items))).collect();
    if !extra.is_empty() {
        out.insert("extra".into(), Value::Object(extra));
    }
    Value::Object(out)
}

/// A role's rules.
fn policy_rules(rules: Vec<rbacv1::PolicyRule>) -> Value {
    let rules = rules.into_iter().map(|rule| {
        let mut out = Map::new();
        put_strs(&mut out, "verbs", rule.verbs);
        put_strs(&mut out, "apiGroups", rule.api_groups);
        put_strs(&mut out, "resources", rule.resources);
        put_strs(&mut out, "resourceNames", rule.resource_names);
        put_strs(&mut out, "nonResourceURLs", rule.non_resource_ur_ls);
        Value::Object(out)
    });
    Value::Array(rules.collect())
}

/// A binding's subjects and role.
fn put_binding(
    out: &mut Map<String, Value>,
    subjects: Vec<rbacv1::Subject>,
    role: Option<rbacv1::RoleRef>,
) {
    let subjects: Vec<Value> = subjects
        .into_iter()
        .map(|subject| {
            let mut s = Map::new();
            put_str(&mut s, "kind", subject.kind);
            put_str(&mut s, "apiGroup", subject.api_group);
            put_str(&mut s, "name", subject.name);
            put_str(&mut s, "namespace", subject.namespace);
            Value::Object(s)
        })
        .collect();
    if !subjects.is_empty() {
        out.insert("subjects".into(), Value::Array(subjects));
    }
    let role = role.unwrap_or_default();
    let mut role_ref = Map::new();
    put_str(&mut role_ref, "apiGroup", role.api_group);
    put_str(&mut role_ref, "kind", role.kind);
    put_str(&mut role_ref, "name", role.name);
    out.insert("roleRef".into(), Value::Object(role_ref));
}

fn put_str(map: &mut Map<String, Value>, key: &str, value: Option<String>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        map.insert(key.into(), Value::String(v));
    }
}

fn put_bool(map: &mut Map<String, Value>, key: &str, value: Option<bool>) {
    if let Some(v) = value {
        map.insert(key.into(), Value::Bool(v));
    }
}

fn put_int<T: Into<i64>>(map: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        map.insert(key.into(), json!(v.into()));
    }
}

/// A Go field that is not a pointer and is `omitempty` in JSON: Go's protobuf writes it even
/// when it is zero, and its JSON leaves it out then, as this does.
fn put_nonzero_int<T: Into<i64>>(map: &mut Map<String, Value>, key: &str, value: Option<T>) {
    put_int(map, key, value.map(Into::into).filter(|v| *v != 0));
}

/// As `put_nonzero_int`, for a `bool`: only `true` is written.
fn put_true(map: &mut Map<String, Value>, key: &str, value: Option<bool>) {
    put_bool(map, key, value.filter(|v| *v));
}

fn put_strs(map: &mut Map<String, Value>, key: &str, values: Vec<String>) {
    if !values.is_empty() {
        map.insert(key.into(), json!(values));
    }
}

fn put_map(map: &mut Map<String, Value>, key: &str, values: BTreeMap<String, String>) {
    if !values.is_empty() {
        map.insert(key.into(), json!(values));
    }
}

fn put_bytes_map(map: &mut Map<String, Value>, key: &str, values: BTreeMap<String, Vec<u8>>) {
    if !values.is_empty() {
        let encoded: Map<String, Value> = values
            .into_iter()
            .map(|(k, v)| (k, Value::String(base64::engine::general_purpose::STANDARD.encode(v))))
            .collect();
        map.insert(key.into(), Value::Object(encoded));
    }
}

fn put_quantities(map: &mut Map<String, Value>, key: &str, values: BTreeMap<String, Quantity>) {
    if !values.is_empty() {
        let quantities: Map<String, Value> =
            values.into_iter().map(|(k, v)| (k, json!(v.string.unwrap_or_default()))).collect();
        map.insert(key.into(), Value::Object(quantities));
    }
}

fn put_local_refs(map: &mut Map<String, Value>, key: &str, refs: Vec<pb::LocalObjectReference>) {
    if !refs.is_empty() {
        let list: Vec<Value> = refs
            .into_iter()
            .map(|r| {
                let mut m = Map::new();
                put_str(&mut m, "name", r.name);
                Value::Object(m)
            })
            .collect();
        map.insert(key.into(), Value::Array(list));
    }
}

fn meta(meta: Option<ObjectMeta>) -> Value {
    let meta = meta.unwrap_or_default();
    let mut m = Map::new();
    put_str(&mut m, "name", meta.name);
    put_str(&mut m, "generateName", meta.generate_name);
    put_str(&mut m, "namespace", meta.namespace);
    put_str(&mut m, "uid", meta.uid);
    put_str(&mut m, "resourceVersion", meta.resource_version);
    put_map(&mut m, "labels", meta.labels);
    put_map(&mut m, "annotations", meta.annotations);
    if !meta.owner_references.is_empty() {
        let refs: Vec<Value> = meta
            .owner_references
            .into_iter()
            .map(|o| {
                let mut r = Map::new();
                put_str(&mut r, "apiVersion", o.api_version);
                put_str(&mut r, "kind", o.kind);
                put_str(&mut r, "name", o.name);
                put_str(&mut r, "uid", o.uid);
                put_bool(&mut r, "controller", o.controller);
                put_bool(&mut r, "blockOwnerDeletion", o.block_owner_deletion);
                Value::Object(r)
            })
            .collect();
        m.insert("ownerReferences".into(), Value::Array(refs));
    }
    put_strs(&mut m, "finalizers", meta.finalizers);
    Value::Object(m)
}

fn object_reference(r: pb::ObjectReference) -> Value {
    let mut m = Map::new();
    put_str(&mut m, "kind", r.kind);
    put_str(&mut m, "namespace", r.namespace);
    put_str(&mut m, "name", r.name);
    put_str(&mut m, "uid", r.uid);
    put_str(&mut m, "apiVersion", r.api_version);
    put_str(&mut m, "resourceVersion", r.resource_version);
    put_str(&mut m, "fieldPath", r.field_path);
    Value::Object(m)
}

/// A delete's options, into `out`.
fn delete_options(out: &mut Map<String, Value>, options: DeleteOptions) {
    put_int(out, "gracePeriodSeconds", options.grace_period_seconds);
    if let Some(pre) = options.preconditions {
        let mut preconditions = Map::new();
        put_str(&mut preconditions, "uid", pre.uid);
        put_str(&mut preconditions, "resourceVersion", pre.resource_version);
        out.insert("preconditions".into(), Value::Object(preconditions));
    }
    put_bool(out, "orphanDependents", options.orphan_dependents);
    put_str(out, "propagationPolicy", options.propagation_policy);
    put_strs(out, "dryRun", options.dry_run);
}

/// A `metav1.LabelSelector`.
fn label_selector(selector: LabelSelector) -> Value {
    let mut out = Map::new();
    put_map(&mut out, "matchLabels", selector.match_labels);
    let expressions: Vec<Value> = selector
        .match_expressions
        .into_iter()
        .map(|e| {
            let mut expression = Map::new();
            put_str(&mut expression, "key", e.key);
            put_str(&mut expression, "operator", e.operator);
            put_strs(&mut expression, "values", e.values);
            Value::Object(expression)
        })
        .collect();
    if !expressions.is_empty() {
        out.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Value::Object(out)
}

/// IntOrString: type 1 is a string, anything else an int.
fn int_or_string(v: IntOrString) -> Value {
    if v.r#type == Some(1) {
        json!(v.str_val.unwrap_or_default())
    } else {
        json!(v.int_val.unwrap_or_default())
    }
}

fn service_spec(spec: pb::ServiceSpec) -> Value {
    let mut m = Map::new();
    if !spec.ports.is_empty() {
        let ports: Vec<Value> = spec
            .ports
            .into_iter()
            .map(|p| {
                let mut port = Map::new();
                put_str(&mut port, "name", p.name);
                put_str(&mut port, "protocol", p.protocol);
                put_str(&mut port, "appProtocol", p.app_protocol);
                put_int(&mut port, "port", p.port);
                if let Some(t) = p.target_port {
                    port.insert("targetPort".into(), int_or_string(t));
                }
                put_nonzero_int(&mut port, "nodePort", p.node_port);
                Value::Object(port)
            })
            .collect();
        m.insert("ports".into(), Value::Array(ports));
    }
    put_map(&mut m, "selector", spec.selector);
    put_str(&mut m, "clusterIP", spec.cluster_ip);
    put_strs(&mut m, "clusterIPs", spec.cluster_ips);
    put_str(&mut m, "type", spec.r#type);
    put_strs(&mut m, "externalIPs", spec.external_ips);
    put_str(&mut m, "sessionAffinity", spec.session_affinity);
    put_str(&mut m, "loadBalancerIP", spec.load_balancer_ip);
    put_str(&mut m, "externalName", spec.external_name);
    put_str(&mut m, "externalTrafficPolicy", spec.external_traffic_policy);
    put_true(&mut m, "publishNotReadyAddresses", spec.publish_not_ready_addresses);
    put_strs(&mut m, "ipFamilies", spec.ip_families);
    put_str(&mut m, "ipFamilyPolicy", spec.ip_family_policy);
    put_str(&mut m, "internalTrafficPolicy", spec.internal_traffic_policy);
    Value::Object(m)
}

fn container(c: pb::Container) -> Value {
    let mut m = Map::new();
    put_str(&mut m, "name", c.name);
    put_str(&mut m, "image", c.image);
    put_strs(&mut m, "command", c.command);
    put_strs(&mut m, "args", c.args);
    put_str(&mut m, "workingDir", c.working_dir);
    if !c.ports.is_empty() {
        let ports: Vec<Value> = c
            .ports
            .into_iter()
            .map(|p| {
                let mut port = Map::new();
                put_str(&mut port, "name", p.name);
                put_nonzero_int(&mut port, "hostPort", p.host_port);
                put_int(&mut port, "containerPort", p.container_port);
                put_str(&mut port, "protocol", p.protocol);
                put_str(&mut port, "hostIP", p.host_ip);
                Value::Object(port)
            })
            .collect();
        m.insert("ports".into(), Value::Array(ports));
    }
    if !c.env.is_empty() {
        let env: Vec<Value> = c
            .env
            .into_iter()
            .map(|e| {
                let mut var = Map::new();
                put_str(&mut var, "name", e.name);
                put_str(&mut var, "value", e.value);
                Value::Object(var)
            })
            .collect();
        m.insert("env".into(), Value::Array(env));
    }
    if let Some(r) = c.resources {
        let mut res = Map::new();
        put_quantities(&mut res, "limits", r.limits);
        put_quantities(&mut res, "requests", r.requests);
        m.insert("resources".into(), Value::Object(res));
    }
    put_str(&mut m, "terminationMessagePath", c.termination_message_path);
    put_str(&mut m, "terminationMessagePolicy", c.termination_message_policy);
    put_str(&mut m, "imagePullPolicy", c.image_pull_policy);
    put_true(&mut m, "stdin", c.stdin);
    put_true(&mut m, "stdinOnce", c.stdin_once);
    put_true(&mut m, "tty", c.tty);
    Value::Object(m)
}

/// What `kubectl create quota` sets: hard limits, scopes and a scope selector.
fn quota_spec(spec: pb::ResourceQuotaSpec) -> Value {
    let mut m = Map::new();
    put_quantities(&mut m, "hard", spec.hard);
    put_strs(&mut m, "scopes", spec.scopes);
    if let Some(selector) = spec.scope_selector {
        let expressions: Vec<Value> = selector
            .match_expressions
            .into_iter()
            .map(|e| {
                let mut expression = Map::new();
                put_str(&mut expression, "scopeName", e.scope_name);
                put_str(&mut expression, "operator", e.operator);
                put_strs(&mut expression, "values", e.values);
                Value::Object(expression)
            })
            .collect();
        m.insert("scopeSelector".into(), json!({"matchExpressions": expressions}));
    }
    Value::Object(m)
}

fn pod_spec(spec: pb::PodSpec) -> Value {
    let mut m = Map::new();
    if !spec.init_containers.is_empty() {
        m.insert(
            "initContainers".into(),
            Value::Array(spec.init_containers.into_iter().map(container).collect()),
        );
    }
    m.insert(
        "containers".into(),
        Value::Array(spec.containers.into_iter().map(container).collect()),
    );
    put_str(&mut m, "restartPolicy", spec.restart_policy);
    put_int(&mut m, "terminationGracePeriodSeconds", spec.termination_grace_period_seconds);
    put_int(&mut m, "activeDeadlineSeconds", spec.active_deadline_seconds);
    put_str(&mut m, "dnsPolicy", spec.dns_policy);
    put_map(&mut m, "nodeSelector", spec.node_selector);
    put_str(&mut m, "serviceAccountName", spec.service_account_name);
    put_str(&mut m, "serviceAccount", spec.service_account);
    put_bool(&mut m, "automountServiceAccountToken", spec.automount_service_account_token);
    put_str(&mut m, "nodeName", spec.node_name);
    put_true(&mut m, "hostNetwork", spec.host_network);
    put_local_refs(&mut m, "imagePullSecrets", spec.image_pull_secrets);
    put_str(&mut m, "hostname", spec.hostname);
    put_str(&mut m, "subdomain", spec.subdomain);
    put_str(&mut m, "schedulerName", spec.scheduler_name);
    put_str(&mut m, "priorityClassName", spec.priority_class_name);
    put_int(&mut m, "priority", spec.priority);
    put_bool(&mut m, "enableServiceLinks", spec.enable_service_links);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    fn named(name: &str, namespace: &str) -> Option<ObjectMeta> {
        Some(ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        })
    }

    #[test]
    fn kubectl_create_namespace_body() {
        let hex_body = "6b3873000a0f0a0276311209 4e616d657370616365 1219 0a110a01741200 1a00 2200 2a00 3200 3800 4200 12001a020a00 1a00 2200";
        let body = hex::decode(hex_body.replace(' ', "")).unwrap();
        let obj = decode(&body).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "t"}, "spec": {}})
        );
    }

    #[test]
    fn configmap_body() {
        let cm = pb::ConfigMap {
            metadata: Some(ObjectMeta {
                labels: BTreeMap::from([("app".into(), "x".into())]),
                ..named("c", "default").unwrap()
            }),
            data: BTreeMap::from([("k".into(), "v".into())]),
            binary_data: BTreeMap::from([("b".into(), b"hi".to_vec())]),
            immutable: None,
        };
        let obj = decode(&wrap("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "c", "namespace": "default", "labels": {"app": "x"}},
                   "data": {"k": "v"}, "binaryData": {"b": "aGk="}})
        );
    }

    #[test]
    fn secret_body() {
        let secret = pb::Secret {
            metadata: named("s", "ns1"),
            data: BTreeMap::from([("password".into(), b"secret".to_vec())]),
            string_data: BTreeMap::from([("user".into(), "admin".into())]),
            r#type: Some("Opaque".into()),
            immutable: None,
        };
        let obj = decode(&wrap("v1", "Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s", "namespace": "ns1"},
                   "data": {"password": "c2VjcmV0"}, "stringData": {"user": "admin"}, "type": "Opaque"})
        );
    }

    #[test]
    fn resource_quota_body() {
        let quantity = |q: &str| Quantity { string: Some(q.into()) };
        let quota = pb::ResourceQuota {
            metadata: named("q", "ns1"),
            spec: Some(pb::ResourceQuotaSpec {
                hard: BTreeMap::from([
                    ("pods".into(), quantity("10")),
                    ("requests.cpu".into(), quantity("2")),
                ]),
                scopes: vec!["BestEffort".into()],
                scope_selector: Some(pb::ScopeSelector {
                    match_expressions: vec![pb::ScopedResourceSelectorRequirement {
                        scope_name: Some("PriorityClass".into()),
                        operator: Some("In".into()),
                        values: vec!["high".into()],
                    }],
                }),
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "ResourceQuota", quota.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "ResourceQuota", "apiVersion": "v1",
                   "metadata": {"name": "q", "namespace": "ns1"},
                   "spec": {"hard": {"pods": "10", "requests.cpu": "2"}, "scopes": ["BestEffort"],
                            "scopeSelector": {"matchExpressions": [
                                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}})
        );
    }

    #[test]
    fn service_body() {
        let svc = pb::Service {
            metadata: named("web", "default"),
            spec: Some(pb::ServiceSpec {
                ports: vec![
                    pb::ServicePort {
                        name: Some("80-8080".into()),
                        protocol: Some("TCP".into()),
                        port: Some(80),
                        target_port: Some(IntOrString {
                            r#type: Some(0),
                            int_val: Some(8080),
                            str_val: None,
                        }),
                        // Go's protobuf writes the zero of a field that is not a pointer.
                        node_port: Some(0),
                        ..Default::default()
                    },
                    pb::ServicePort {
                        port: Some(443),
                        target_port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: None,
                            str_val: Some("https".into()),
                        }),
                        node_port: Some(30443),
                        ..Default::default()
                    },
                ],
                selector: BTreeMap::from([("app".into(), "web".into())]),
                r#type: Some("NodePort".into()),
                cluster_ip: Some(String::new()),
                session_affinity: Some("None".into()),
                publish_not_ready_addresses: Some(false),
                ..Default::default()
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "Service", svc.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                                      {"port": 443, "targetPort": "https", "nodePort": 30443}],
                            "selector": {"app": "web"}, "type": "NodePort", "sessionAffinity": "None"}})
        );
    }

    #[test]
    fn eviction_and_disruption_budget_bodies() {
        use k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let eviction = policyv1::Eviction {
            metadata: named("web-1", "default"),
            delete_options: Some(DeleteOptions {
                grace_period_seconds: Some(5),
                ..Default::default()
            }),
        };
        let obj = decode(&wrap("policy/v1", "Eviction", eviction.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Eviction", "apiVersion": "policy/v1",
                "metadata": {"name": "web-1", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 5}})
        );
        let budget = policyv1::PodDisruptionBudget {
            metadata: named("web", "default"),
            spec: Some(policyv1::PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString {
                    r#type: Some(1),
                    int_val: None,
                    str_val: Some("25%".into()),
                }),
                selector: Some(LabelSelector {
                    match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                    match_expressions: vec![LabelSelectorRequirement {
                        key: Some("tier".into()),
                        operator: Some("Exists".into()),
                        values: vec![],
                    }],
                }),
                ..Default::default()
            }),
            status: None,
        };
        let obj =
            decode(&wrap("policy/v1", "PodDisruptionBudget", budget.encode_to_vec())).unwrap();
        assert_eq!(
            obj["spec"],
            json!({"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}]}})
        );
    }

    #[test]
    fn delete_options_body() {
        use k8s_pb::apimachinery::pkg::apis::meta::v1::Preconditions;
        let options = DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some("u1".into()), resource_version: None }),
            propagation_policy: Some("Foreground".into()),
            dry_run: vec!["All".into()],
            ..Default::default()
        };
        let obj = decode(&wrap("v1", "DeleteOptions", options.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                   "preconditions": {"uid": "u1"}, "propagationPolicy": "Foreground",
                   "dryRun": ["All"]})
        );
    }

    #[test]
    fn service_account_and_pod_bodies() {
        let sa = pb::ServiceAccount { metadata: named("sa", "default"), ..Default::default() };
        let obj = decode(&wrap("v1", "ServiceAccount", sa.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": "sa", "namespace": "default"}})
        );

        let pod = pb::Pod {
            metadata: Some(ObjectMeta {
                labels: BTreeMap::from([("run".into(), "p".into())]),
                ..named("p", "default").unwrap()
            }),
            spec: Some(pb::PodSpec {
                containers: vec![pb::Container {
                    name: Some("p".into()),
                    image: Some("nginx".into()),
                    ports: vec![pb::ContainerPort {
                        container_port: Some(80),
                        ..Default::default()
                    }],
                    resources: Some(pb::ResourceRequirements::default()),
                    ..Default::default()
                }],
                restart_policy: Some("Always".into()),
                dns_policy: Some("ClusterFirst".into()),
                ..Default::default()
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "Pod", pod.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "p", "namespace": "default", "labels": {"run": "p"}},
                   "spec": {"containers": [{"name": "p", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}],
                            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}})
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(decode(b"").is_err());
        assert!(decode(b"{\"kind\":\"Namespace\"}").is_err());
        assert!(decode(b"k8s\0\xff\xff\xff\xff\xff").is_err());
        assert!(decode(&wrap("v1", "Namespace", vec![0x0a, 0xff, 0x01])).is_err());
        let err = decode(&wrap("apps/v1", "Deployment", vec![])).unwrap_err();
        assert!(err.contains("Deployment"), "{err}");
        // Arbitrary byte soup never panics.
        for seed in 0u32..2000 {
            let mut bytes = MAGIC.to_vec();
            let mut x = seed.wrapping_mul(2654435761).wrapping_add(7);
            for _ in 0..(seed % 64) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                bytes.push((x & 0xff) as u8);
            }
            let _ = decode(&bytes);
            let _ = decode(&wrap("v1", "Service", bytes[4..].to_vec()));
        }
    }
}

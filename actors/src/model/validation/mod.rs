//! Validation of names, labels and the few per-kind rules the server enforces on every write.

use serde_json::Value;

use std::cmp::Ordering;

use super::finalizers::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, STANDARD_FINALIZERS};
use super::text::go_quote;
use super::{json, quantity, sysctl, FastSet, ResourceType};

mod addresses;
mod disruption_budget;
mod env;
mod pod_warnings;
mod priority_class;
mod resource_policy;
mod security_context;
mod service;
mod storage;

use addresses::validate_ip;
pub use pod_warnings::{
    pod as pod_warnings, pod_name as pod_name_warning, template as pod_template_warnings,
};
pub use service::warnings as service_warnings;

/// An IPv4 address as Kubernetes reads one (`ParseIPSloppy`: leading zeros taken, `010.1.2.3`
/// being `10.1.2.3`).
pub fn parse_ipv4(text: &str) -> Option<std::net::Ipv4Addr> {
    match addresses::parse_ip(text)? {
        std::net::IpAddr::V4(ip) => Some(ip),
        std::net::IpAddr::V6(_) => None,
    }
}

/// One invalid field, as reported in a 422 Status' `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueDuplicate`, ...
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

/// Values are quoted as Go's `%q` quotes them (`"a\x01b"`), as Kubernetes' messages have them.
impl FieldError {
    /// A value outside a fixed set (Kubernetes' `FieldValueNotSupported`).
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                go_quote(value),
                supported.join(", ")
            ),
        }
    }

    pub fn required(field: impl Into<String>) -> Self {
        Self { reason: "FieldValueRequired", field: field.into(), message: "Required value".into() }
    }

    /// A required value, with why (`Required value: must specify a handler type`).
    fn required_because(field: impl Into<String>, detail: &str) -> Self {
        let message = format!("Required value: {detail}");
        Self { reason: "FieldValueRequired", field: field.into(), message }
    }

    /// A reference to something not there (Kubernetes' `FieldValueNotFound`).
    fn not_found(field: impl Into<String>, value: &str) -> Self {
        let message = format!("Not found: {}", go_quote(value));
        Self { reason: "FieldValueNotFound", field: field.into(), message }
    }

    pub fn invalid(field: impl Into<String>, value: &str, detail: impl AsRef<str>) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {}: {}", go_quote(value), detail.as_ref()),
        }
    }

    /// An invalid number, written unquoted as Kubernetes writes it (`Invalid value: 0: ...`).
    pub fn invalid_number(
        field: impl Into<String>,
        value: impl std::fmt::Display,
        detail: impl AsRef<str>,
    ) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {}", detail.as_ref()),
        }
    }

    /// An invalid value Kubernetes prints as a Go value (`[]string{"a"}`), written as it is.
    pub fn invalid_printed(field: impl Into<String>, printed: &str, detail: &str) -> Self {
        Self::invalid_number(field, printed, detail)
    }

    /// A patch whose result does not decode as the object's type (Kubernetes names the field
    /// `patch`).
    pub fn invalid_patch(decoding: impl Into<String>) -> Self {
        Self { reason: "FieldValueInvalid", field: "patch".into(), message: decoding.into() }
    }

    /// Kubernetes' `FieldValueForbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl AsRef<str>) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {}", detail.as_ref()),
        }
    }

    /// A list of more than `most` items (Kubernetes' `FieldValueTooMany`).
    fn too_many(field: impl Into<String>, most: usize) -> Self {
        Self {
            reason: "FieldValueTooMany",
            field: field.into(),
            message: format!("Too many: must have at most {most} items"),
        }
    }

    /// A value longer than `most` bytes (Kubernetes' `FieldValueTooLong`).
    pub fn too_long(field: impl Into<String>, most: usize) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {most} bytes"),
        }
    }

    fn duplicate(field: impl Into<String>, value: &str) -> Self {
        Self {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {}", go_quote(value)),
        }
    }

    /// A duplicate whose value Kubernetes prints as a Go struct (`value`, written as it is),
    /// with why when it says.
    fn duplicate_struct(field: impl Into<String>, value: &str, detail: Option<&str>) -> Self {
        let message = match detail {
            Some(detail) => format!("Duplicate value: {value}: {detail}"),
            None => format!("Duplicate value: {value}"),
        };
        Self { reason: "FieldValueDuplicate", field: field.into(), message }
    }
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case \
alphanumeric characters or '-', and must start and end with an alphanumeric character \
(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
(e.g. 'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Problems with `value` as an RFC 1123 label (at most 63 characters).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !is_dns_label(value) {
        errors.push(DNS1123_LABEL_MSG.to_string());
    }
    errors
}

const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric \
characters or '-', start with an alphabetic character, and end with an alphanumeric character \
(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Problems with `value` as a DNS-1035 label (an RFC 1123 label that starts with a letter; at
/// most 63 characters): a Service's name.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !is_dns_label(value) || !value.as_bytes()[0].is_ascii_lowercase() {
        errors.push(DNS1035_LABEL_MSG.to_string());
    }
    errors
}

/// Problems with `value` as an RFC 1123 subdomain (at most 253 characters).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    if value.is_empty() || !value.split('.').all(is_dns_label) {
        errors.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errors
}

fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Kubernetes' message for a name part that does not match `QUALIFIED_NAME_REGEX`.
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// The most characters of a qualified name's name part, and of a label value.
const QUALIFIED_NAME_MAX: usize = 63;

/// Problems with a qualified name (`[prefix/]name`: a label key, an annotation key once
/// lowercased, a finalizer...), worded as Kubernetes' `IsQualifiedName` words them.
pub fn label_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    // Split without allocating: this runs for every label and annotation key written.
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and \
                 '/' (e.g. 'example.com/MyName')"
            )]
        }
        Some(("", name)) => {
            errors.push("prefix part must be non-empty".to_string());
            name
        }
        Some((prefix, name)) => {
            let prefix_errors = dns1123_subdomain_errors(prefix).into_iter();
            errors.extend(prefix_errors.map(|e| format!("prefix part {e}")));
            name
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("name part must be no more than {QUALIFIED_NAME_MAX} characters"));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errors
}

/// Problems with a label value (empty, or a qualified-name part), worded as Kubernetes'
/// `IsValidLabelValue` words them.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("must be no more than {QUALIFIED_NAME_MAX} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  \
             or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_string(),
        );
    }
    errors
}

/// Kubernetes' extra rule for the finalizers of its own kinds (`validateKubeFinalizerName`):
/// one without a `/` must be a standard one.
fn kube_finalizer_error(name: &str) -> Option<&'static str> {
    (!name.contains('/') && !STANDARD_FINALIZERS.contains(&name))
        .then_some("name is neither a standard finalizer name nor is it fully qualified")
}

/// What is wrong with `name` as the name of a `resource`.
fn name_errors(resource: &ResourceType, name: &str) -> Vec<String> {
    if resource.group == crate::model::resources::RBAC_GROUP {
        // Roles and bindings are named like path segments (`system:basic-user`).
        path_segment_errors(name)
    } else if resource.group.is_empty() && resource.kind == "Event" {
        // Core events keep their legacy leniency (client-go names an event after its object,
        // `system:controller:x.<hex>` for a ClusterRole's); events.k8s.io's are subdomains.
        path_segment_errors(name)
    } else if resource.group.is_empty() && resource.kind == "Service" {
        dns1035_label_errors(name)
    } else if resource.name_is_label {
        dns1123_label_errors(name)
    } else {
        dns1123_subdomain_errors(name)
    }
}

/// Checks a new object's `generateName` as the start of a name, as Kubernetes checks it on a
/// create (not on updates): a trailing '-' is masked first, except for RBAC's kinds, whose
/// names are path segments.
pub fn validate_generate_name(resource: &ResourceType, object: &Value) -> Vec<FieldError> {
    let meta = object.get("metadata");
    let prefix = meta.and_then(|m| m.get("generateName")).and_then(Value::as_str).unwrap_or("");
    if prefix.is_empty() {
        return Vec::new();
    }
    let checked = if resource.group == crate::model::resources::RBAC_GROUP {
        prefix.to_string()
    } else {
        mask_trailing_dash(prefix)
    };
    let problems = name_errors(resource, &checked);
    problems.into_iter().map(|p| FieldError::invalid("metadata.generateName", prefix, p)).collect()
}

/// Kubernetes' `maskTrailingDash`: a prefix ending in '-' (and longer than one byte) is checked
/// with its last two bytes replaced by 'a', as something will follow the dash. A character
/// before the dash that is not ASCII stays (no name may hold it).
fn mask_trailing_dash(prefix: &str) -> String {
    match prefix.strip_suffix('-') {
        Some(rest) if !rest.is_empty() => {
            let mut masked = rest.to_string();
            if masked.chars().next_back().is_some_and(|c| c.is_ascii()) {
                masked.pop();
            }
            masked.push('a');
            masked
        }
        _ => prefix.to_string(),
    }
}

/// The parts of an object's metadata every kind checks alike, as Kubernetes'
/// `ValidateObjectMeta` past the name: labels, annotations, generation, owner references
/// and finalizers.
pub fn validate_meta_fields(meta: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["labels", "annotations"] {
        match meta.and_then(|m| m.get(field)) {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(other) => errors.push(FieldError::invalid(
                format!("metadata.{field}"),
                &other.to_string(),
                "must be a map of strings",
            )),
        }
    }
    validate_labels(meta.and_then(|m| m.get("labels")), "metadata.labels", &mut errors);
    let annotations = meta.and_then(|m| m.get("annotations"));
    validate_annotations(annotations, "metadata.annotations", &mut errors);
    let generation = meta.and_then(|m| m.get("generation")).and_then(Value::as_i64);
    if let Some(negative) = generation.filter(|g| *g < 0) {
        let message = "must be greater than or equal to 0";
        errors.push(FieldError::invalid_number("metadata.generation", negative, message));
    }
    validate_owner_references(meta.and_then(|m| m.get("ownerReferences")), &mut errors);
    let finalizers = meta.map(|m| json::strings(m, "finalizers")).unwrap_or_default();
    validate_finalizers(&finalizers, &mut errors);
    errors
}

/// Validates an object about to be written: its metadata, and the per-kind rules.
pub fn validate_object(resource: &ResourceType, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let meta = object.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        errors.push(FieldError::required_because(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for p in name_errors(resource, name) {
            errors.push(FieldError::invalid("metadata.name", name, p));
        }
    }
    errors.extend(validate_meta_fields(meta));
    match resource.kind {
        "Pod" => {
            if let Err(cost) = super::pod_deletion_cost(object) {
                let field = format!("metadata.annotations[{}]", super::POD_DELETION_COST);
                errors.push(FieldError::invalid(field, cost, "must be a 32bit integer"));
            }
            validate_pod_spec(object.get("spec"), "spec", true, &mut errors);
            let status = object.get("status");
            for list in ["podIPs", "hostIPs"] {
                validate_pod_ips(status.and_then(|s| s.get(list)), list, &mut errors);
            }
            validate_pod_conditions(status.and_then(|s| s.get("conditions")), &mut errors);
        }
        "ReplicationController" => validate_rc(object, &mut errors),
        "PodTemplate" => validate_pod_template(object, &mut errors),
        "Service" => service::validate(object, &mut errors),
        "ConfigMap" => validate_data(object, &["data", "binaryData"], false, &mut errors),
        "Secret" => {
            validate_data(object, &["data"], true, &mut errors);
            validate_secret_type(object, &mut errors);
        }
        "PersistentVolumeClaim" => storage::validate_claim(object.get("spec"), &mut errors),
        "PersistentVolume" => storage::validate_volume(object, &mut errors),
        "Event" => validate_event(object, &mut errors),
        "Endpoints" => validate_endpoints(object, &mut errors),
        "EndpointSlice" => validate_endpoint_slice(object, &mut errors),
        "PodDisruptionBudget" => disruption_budget::validate(object, &mut errors),
        "PriorityClass" => priority_class::validate(object, &mut errors),
        "Role" | "ClusterRole" => validate_role(object, resource.namespaced, &mut errors),
        "RoleBinding" | "ClusterRoleBinding" => {
            validate_role_binding(object, resource.namespaced, &mut errors)
        }
        "Lease" => validate_lease(object.get("spec"), &mut errors),
        "ResourceQuota" => resource_policy::validate_quota(object, &mut errors),
        "LimitRange" => resource_policy::validate_limit_range(object, &mut errors),
        "Node" => {
            validate_taints(json::at(object, "/spec/taints"), &mut errors);
            validate_node_resources(object, &mut errors);
            validate_pod_cidrs(object, &mut errors);
        }
        "Namespace" => {
            let finalizers = object.get("spec").map(|s| json::strings(s, "finalizers"));
            for name in finalizers.unwrap_or_default() {
                let problems = label_key_errors(&name)
                    .into_iter()
                    .chain(kube_finalizer_error(&name).map(String::from));
                errors.extend(problems.map(|p| FieldError::invalid("spec.finalizers", &name, p)));
            }
        }
        _ => {}
    }
    errors
}

/// An object's `metadata.finalizers`, as Kubernetes validates those of its own kinds: each a
/// qualified name (the problems at the list), not both `orphan` and `foregroundDeletion`,
/// then each without a prefix a standard one (at its index).
fn validate_finalizers(finalizers: &[String], errors: &mut Vec<FieldError>) {
    for name in finalizers {
        errors.extend(
            label_key_errors(name)
                .into_iter()
                .map(|p| FieldError::invalid("metadata.finalizers", name, p)),
        );
    }
    let has = |wanted: &str| finalizers.iter().any(|f| f == wanted);
    if has(ORPHAN_FINALIZER) && has(FOREGROUND_FINALIZER) {
        let message = "finalizer orphan and foregroundDeletion cannot be both set";
        errors.push(FieldError::invalid_number(
            "metadata.finalizers",
            go_strings(finalizers),
            message,
        ));
    }
    for (i, name) in finalizers.iter().enumerate() {
        if let Some(problem) = kube_finalizer_error(name) {
            errors.push(FieldError::invalid(format!("metadata.finalizers[{i}]"), name, problem));
        }
    }
}

/// A name that is a path segment: not `.` or `..`, no `/` or `%` (Kubernetes'
/// `ValidatePathSegmentName`).
fn path_segment_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn string_list_len(value: &Value, key: &str) -> usize {
    value.get(key).and_then(Value::as_array).map_or(0, Vec::len)
}

/// A Role's or ClusterRole's rules, as Kubernetes' `ValidatePolicyRule` checks them.
fn validate_role(role: &Value, namespaced: bool, errors: &mut Vec<FieldError>) {
    let rules = role.get("rules").and_then(Value::as_array).into_iter().flatten();
    for (i, rule) in rules.enumerate() {
        let field = |name: &str| format!("rules[{i}].{name}");
        if string_list_len(rule, "verbs") == 0 {
            let why = "verbs must contain at least one value";
            errors.push(FieldError::required_because(field("verbs"), why));
        }
        if string_list_len(rule, "nonResourceURLs") > 0 {
            let urls = go_strings(&json::strings(rule, "nonResourceURLs"));
            let mut invalid = |detail: &str| {
                errors.push(FieldError::invalid_printed(field("nonResourceURLs"), &urls, detail))
            };
            if namespaced {
                invalid("namespaced rules cannot apply to non-resource URLs");
            }
            if ["apiGroups", "resources", "resourceNames"]
                .iter()
                .any(|k| string_list_len(rule, k) > 0)
            {
                invalid("rules cannot apply to both regular resources and non-resource URLs");
            }
            continue;
        }
        if string_list_len(rule, "apiGroups") == 0 {
            let why = "resource rules must supply at least one api group";
            errors.push(FieldError::required_because(field("apiGroups"), why));
        }
        if string_list_len(rule, "resources") == 0 {
            let why = "resource rules must supply at least one resource";
            errors.push(FieldError::required_because(field("resources"), why));
        }
    }
    if let Some(rule) = role.get("aggregationRule").filter(|r| !r.is_null()) {
        let path = "aggregationRule.clusterRoleSelectors";
        let selectors = rule.get("clusterRoleSelectors").and_then(Value::as_array);
        let selectors = selectors.map_or(&[][..], Vec::as_slice);
        if selectors.is_empty() {
            let why = "at least one clusterRoleSelector required if aggregationRule is non-nil";
            errors.push(FieldError::required_because(path, why));
        }
        for (i, selector) in selectors.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let before = errors.len();
            validate_label_selector(selector, &at, errors);
            // A selector that does not parse is also refused whole (its value printed as the
            // nil selector Kubernetes failed to build).
            if errors.len() > before {
                errors.push(FieldError::invalid(at, "null", "invalid label selector."));
            }
        }
    }
}

/// A binding's role and subjects, as Kubernetes' `ValidateRoleBinding` checks them.
fn validate_role_binding(binding: &Value, namespaced: bool, errors: &mut Vec<FieldError>) {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let role = binding.get("roleRef").cloned().unwrap_or(Value::Null);
    let group = text(&role, "apiGroup");
    if group != crate::model::resources::RBAC_GROUP {
        errors.push(FieldError::not_supported(
            "roleRef.apiGroup",
            &group,
            &[crate::model::resources::RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    let kind = text(&role, "kind");
    if !kinds.contains(&kind.as_str()) {
        errors.push(FieldError::not_supported("roleRef.kind", &kind, kinds));
    }
    let role_name = text(&role, "name");
    if role_name.is_empty() {
        errors.push(FieldError::required("roleRef.name"));
    }
    for problem in path_segment_errors(&role_name) {
        errors.push(FieldError::invalid("roleRef.name", &role_name, problem));
    }
    let subjects = binding.get("subjects").and_then(Value::as_array).into_iter().flatten();
    for (i, subject) in subjects.enumerate() {
        let field = |name: &str| format!("subjects[{i}].{name}");
        if text(subject, "name").is_empty() {
            errors.push(FieldError::required(field("name")));
        }
        let group = text(subject, "apiGroup");
        match text(subject, "kind").as_str() {
            kind @ ("User" | "Group") => {
                if text(subject, "name").is_empty() {
                    let why = format!("{} name cannot be empty", kind.to_ascii_lowercase());
                    errors.push(FieldError::invalid(field("name"), "", why));
                }
                if group != crate::model::resources::RBAC_GROUP {
                    let supported = [crate::model::resources::RBAC_GROUP];
                    errors.push(FieldError::not_supported(field("apiGroup"), &group, &supported));
                }
            }
            "ServiceAccount" => {
                let name = text(subject, "name");
                for problem in
                    dns1123_subdomain_errors(&name).into_iter().filter(|_| !name.is_empty())
                {
                    errors.push(FieldError::invalid(field("name"), &name, problem));
                }
                if !group.is_empty() {
                    errors.push(FieldError::not_supported(field("apiGroup"), &group, &[""]));
                }
                if !namespaced && text(subject, "namespace").is_empty() {
                    errors.push(FieldError::required(field("namespace")));
                }
            }
            other => errors.push(FieldError::not_supported(
                field("kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

/// Annotations (at `path`): qualified keys (checked lowercased, as Kubernetes checks them),
/// 256 KiB of keys and values at most.
fn validate_annotations(annotations: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    let Some(annotations) = annotations.and_then(Value::as_object) else { return };
    for k in annotations.keys() {
        for p in label_key_errors(&k.to_lowercase()) {
            errors.push(FieldError::invalid(path, k, p));
        }
    }
    let size: usize =
        annotations.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    if size > MAX_ANNOTATIONS_BYTES {
        errors.push(FieldError::too_long(path, MAX_ANNOTATIONS_BYTES));
    }
}

/// Labels (or a selector of them, at `path`): qualified names mapped to label values.
fn validate_labels(labels: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    for (k, v) in labels.and_then(Value::as_object).into_iter().flatten() {
        for p in label_key_errors(k) {
            errors.push(FieldError::invalid(path, k, p));
        }
        match v.as_str() {
            // At the map, not the key, as Kubernetes' `ValidateLabels` reports them.
            Some(v) => {
                for p in label_value_errors(v) {
                    errors.push(FieldError::invalid(path, v, p));
                }
            }
            None => errors.push(FieldError::invalid(
                format!("{path}[{k}]"),
                &v.to_string(),
                "must be a string",
            )),
        }
    }
}

/// A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`), as Kubernetes'
/// `ValidateLabelSelector` checks it.
fn validate_label_selector(selector: &Value, path: &str, errors: &mut Vec<FieldError>) {
    validate_labels(selector.get("matchLabels"), &format!("{path}.matchLabels"), errors);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, expression) in expressions.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("{path}.matchExpressions[{i}].{field}");
        let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
        for problem in label_key_errors(key) {
            errors.push(FieldError::invalid(at("key"), key, problem));
        }
        let values = expression.get("values").and_then(Value::as_array);
        let values: Vec<&str> = values.into_iter().flatten().filter_map(Value::as_str).collect();
        let operator = expression.get("operator").and_then(Value::as_str).unwrap_or("");
        selector_operator(operator, values.len(), false, &at, errors);
        for (j, value) in values.iter().enumerate() {
            for problem in label_value_errors(value) {
                errors.push(FieldError::invalid(at(&format!("values[{j}]")), value, problem));
            }
        }
    }
}

/// The selectors an access review's resource attributes (at `path`) may carry
/// (`fieldSelector`, `labelSelector`), as Kubernetes checks them: requirements or a raw
/// selector, one of the two; each requirement's key and values, an operator it does not know
/// let through (a newer client's).
pub fn validate_selector_attributes(attributes: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (name, labels) in [("fieldSelector", false), ("labelSelector", true)] {
        let Some(selector) = attributes.get(name).filter(|s| !s.is_null()) else { continue };
        let at = format!("{path}.{name}");
        let raw = selector.get("rawSelector").and_then(Value::as_str).unwrap_or("");
        let requirements = selector.get("requirements").and_then(Value::as_array);
        let requirements = requirements.map_or(&[][..], Vec::as_slice);
        if !raw.is_empty() && !requirements.is_empty() {
            let detail = "may not specified at the same time as requirements";
            errors.push(FieldError::invalid(format!("{at}.rawSelector"), raw, detail));
        }
        if raw.is_empty() && requirements.is_empty() {
            let why = format!("when {at} is specified, requirements or rawSelector is required");
            errors.push(FieldError::required_because(format!("{at}.requirements"), &why));
        }
        for (i, requirement) in requirements.iter().enumerate() {
            let field = |member: &str| format!("{at}.requirements[{i}].{member}");
            let key = requirement.get("key").and_then(Value::as_str).unwrap_or("");
            let values = requirement.get("values").and_then(Value::as_array).map_or(0, Vec::len);
            let operator = requirement.get("operator").and_then(Value::as_str).unwrap_or("");
            if !labels && key.is_empty() {
                errors.push(FieldError::required_because(field("key"), "must be specified"));
            }
            if matches!(operator, "In" | "NotIn" | "Exists" | "DoesNotExist") {
                selector_operator(operator, values, false, &field, &mut errors);
            }
            if labels {
                for problem in label_key_errors(key) {
                    errors.push(FieldError::invalid(field("key"), key, problem));
                }
            }
        }
    }
    errors
}

/// A selector requirement's operator and how many values it has, as Kubernetes checks a label
/// selector's (`numeric`: a node selector's, which also takes `Gt` and `Lt` with one value).
fn selector_operator(
    operator: &str,
    values: usize,
    numeric: bool,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    match operator {
        "In" | "NotIn" if values == 0 => errors.push(FieldError::required_because(
            at("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if values > 0 => errors.push(FieldError::forbidden(
            at("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if numeric && values != 1 => errors.push(FieldError::required_because(
            at("values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        "Gt" | "Lt" if numeric => {}
        other => {
            errors.push(FieldError::invalid(at("operator"), other, "not a valid selector operator"))
        }
    }
}

/// A core/v1 Event's namespace agrees with its involved object's, by Kubernetes' rules for
/// events of the older form; one of the newer form (with an `eventTime`) also says who
/// reported it, and what and why, within their lengths.
fn validate_event(event: &Value, errors: &mut Vec<FieldError>) {
    let text = |path: &str| json::at(event, path).and_then(Value::as_str).unwrap_or("");
    let (namespace, involved) = (text("/metadata/namespace"), text("/involvedObject/namespace"));
    let newer = event.get("eventTime").is_some_and(|t| !t.is_null());
    let mismatch = match (newer, involved.is_empty()) {
        (false, true) => !namespace.is_empty() && namespace != "default",
        (false, false) => namespace != involved,
        (true, true) => namespace != "default" && namespace != "kube-system",
        (true, false) => false,
    };
    if mismatch {
        let message = "does not match event.namespace";
        errors.push(FieldError::invalid("involvedObject.namespace", involved, message));
    }
    if !newer {
        return;
    }
    let component = text("/reportingComponent");
    if component.is_empty() {
        errors.push(FieldError::required("reportingComponent"));
    }
    for problem in label_key_errors(component).into_iter().filter(|_| !component.is_empty()) {
        errors.push(FieldError::invalid("reportingComponent", component, problem));
    }
    for (field, most) in
        [("reportingInstance", 128), ("action", 128), ("reason", 128), ("message", 1024)]
    {
        let value = text(&format!("/{field}"));
        if value.is_empty() && field != "message" {
            errors.push(FieldError::required(field));
        } else if value.len() > most {
            errors.push(FieldError::invalid(
                field,
                "",
                format!("can have at most {most} characters"),
            ));
        }
    }
}

/// Endpoints: each subset has addresses, each a valid IP (the loopback range is allowed here,
/// where pods' addresses are in it), and ports as a service's (named when several).
fn validate_endpoints(endpoints: &Value, errors: &mut Vec<FieldError>) {
    let subsets = endpoints.get("subsets").and_then(Value::as_array);
    for (i, subset) in subsets.into_iter().flatten().enumerate() {
        let at = |rest: &str| format!("subsets[{i}]{rest}");
        let list =
            |name: &str| subset.get(name).and_then(Value::as_array).filter(|l| !l.is_empty());
        let (ready, not_ready) = (list("addresses"), list("notReadyAddresses"));
        if ready.is_none() && not_ready.is_none() {
            let message = "must specify `addresses` or `notReadyAddresses`";
            errors.push(FieldError::required_because(at(""), message));
        }
        for (name, addresses) in [("addresses", ready), ("notReadyAddresses", not_ready)] {
            for (j, address) in addresses.into_iter().flatten().enumerate() {
                let field = |rest: &str| at(&format!(".{name}[{j}]{rest}"));
                let ip = address.get("ip").and_then(Value::as_str).unwrap_or("");
                validate_ip(ip, || field(".ip"), errors);
                let node = address.get("nodeName").and_then(Value::as_str).unwrap_or("");
                for problem in
                    dns1123_subdomain_errors(node).into_iter().filter(|_| !node.is_empty())
                {
                    errors.push(FieldError::invalid(field(".nodeName"), node, problem));
                }
            }
        }
        let ports = subset.get("ports").and_then(Value::as_array);
        let several = ports.is_some_and(|p| p.len() > 1);
        for (k, port) in ports.into_iter().flatten().enumerate() {
            let field = |rest: &str| at(&format!(".ports[{k}]{rest}"));
            // Names are labels, not checked for repeats (Kubernetes' endpoints rules).
            match port.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                None if several => errors.push(FieldError::required(field(".name"))),
                None => {}
                Some(name) => {
                    for problem in dns1123_label_errors(name) {
                        errors.push(FieldError::invalid(field(".name"), name, problem));
                    }
                }
            }
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            port_number(number, || field(".port"), errors);
            let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            port_protocol(protocol, || field(".protocol"), errors);
        }
    }
}

/// The most an object's annotations may hold, keys and values (Kubernetes' 256 KiB).
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// The most a ConfigMap's or Secret's data may hold (Kubernetes' 1 MiB).
const MAX_DATA_BYTES: usize = 1024 * 1024;

const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', \
'_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
'[-._a-zA-Z0-9]+')";

/// What is wrong with a ConfigMap's or Secret's key (Kubernetes' `IsConfigMapKey`).
fn config_key_errors(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if key.len() > 253 {
        problems.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)) {
        problems.push(CONFIG_KEY_MSG.to_string());
    }
    match key {
        "." => problems.push("must not be '.'".to_string()),
        ".." => problems.push("must not be '..'".to_string()),
        _ if key.starts_with("..") => problems.push("must not start with '..'".to_string()),
        _ => {}
    }
    problems
}

/// Each owner reference names its owner fully; at most one is the controller.
fn validate_owner_references(references: Option<&Value>, errors: &mut Vec<FieldError>) {
    let references = references.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for reference in references {
        for (field, what) in
            [("apiVersion", "version"), ("kind", "kind"), ("name", "name"), ("uid", "uid")]
        {
            if reference.get(field).and_then(Value::as_str).unwrap_or("").is_empty() {
                errors.push(FieldError::invalid(
                    format!("metadata.ownerReferences.{field}"),
                    "",
                    format!("{what} must not be empty"),
                ));
            }
        }
        // Kubernetes' `BannedOwners`: events come and go, and would take their dependents.
        let text = |field: &str| reference.get(field).and_then(Value::as_str).unwrap_or("");
        if text("apiVersion") == "v1" && text("kind") == "Event" {
            let flag = |field: &str| match reference.get(field).and_then(Value::as_bool) {
                Some(set) => format!("(*bool)({set})"),
                None => "(*bool)(nil)".into(),
            };
            let printed = format!(
                "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, \
                 BlockOwnerDeletion:{}}}",
                go_quote(text("apiVersion")),
                go_quote(text("kind")),
                go_quote(text("name")),
                go_quote(text("uid")),
                flag("controller"),
                flag("blockOwnerDeletion"),
            );
            let message = "/v1, Kind=Event is disallowed from being an owner";
            errors.push(FieldError::invalid_printed("metadata.ownerReferences", &printed, message));
        }
    }
    let controllers: Vec<String> = (references.iter())
        .filter(|r| r["controller"] == true)
        .map(|r| {
            let text = |field: &str| r.get(field).and_then(Value::as_str).unwrap_or("");
            format!("{}/{}", text("kind"), text("name"))
        })
        .collect();
    if controllers.len() > 1 {
        errors.push(FieldError::invalid_number(
            "metadata.ownerReferences",
            controllers.len(),
            format!(
                "Only one reference can have Controller set to true. Found \"true\" in \
                 references for {}",
                controllers.join(" and ")
            ),
        ));
    }
}

/// A ConfigMap's or Secret's keys (config keys; a ConfigMap's `data` key not also in its
/// `binaryData`) and size (bytes held: a Secret's and `binaryData`'s decoded), as
/// `ValidateConfigMap`/`ValidateSecret` check them. `base64_data`: `data` holds base64 (a
/// Secret's), not text (a ConfigMap's).
fn validate_data(object: &Value, fields: &[&str], base64_data: bool, errors: &mut Vec<FieldError>) {
    let map_of = |field: &str| object.get(field).and_then(Value::as_object);
    let binary = map_of("binaryData");
    let mut size = 0;
    for field in fields {
        let Some(map) = map_of(field) else { continue };
        for (key, value) in map {
            let text = value.as_str().unwrap_or("");
            size += if *field == "data" && !base64_data { text.len() } else { decoded_len(text) };
            let path = format!("{field}[{key}]");
            for problem in config_key_errors(key) {
                errors.push(FieldError::invalid(&path, key, problem));
            }
            if *field == "data" && !base64_data && binary.is_some_and(|b| b.contains_key(key)) {
                let detail = "duplicate of key present in binaryData";
                errors.push(FieldError::invalid(&path, key, detail));
            }
        }
    }
    if size > MAX_DATA_BYTES {
        // A Secret's is its data's; a ConfigMap's the whole object's (no field).
        errors.push(FieldError::too_long(if base64_data { "data" } else { "" }, MAX_DATA_BYTES));
    }
}

/// The length of what base64 `text` decodes to.
fn decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4 * 3).saturating_sub(padding)
}

/// Go's `json.Unmarshal` of `bytes` into a `map[string]interface{}`: its error, if any (the
/// common ones in Go's words; other syntax errors named generally).
fn json_object_error(bytes: &[u8]) -> Option<String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Some("unexpected end of JSON input".into());
    }
    let kind = match serde_json::from_slice::<Value>(bytes) {
        Err(error) => return Some(format!("invalid JSON: {error}")),
        Ok(Value::Object(_) | Value::Null) => return None,
        Ok(Value::Array(_)) => "array",
        Ok(Value::String(_)) => "string",
        Ok(Value::Number(_)) => "number",
        Ok(Value::Bool(_)) => "bool",
    };
    Some(format!("json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"))
}

/// The keys a Secret's type requires in its data, as Kubernetes checks them.
fn validate_secret_type(secret: &Value, errors: &mut Vec<FieldError>) {
    use base64::Engine as _;
    let data = secret.get("data");
    let has = |key: &str| data.and_then(|d| d.get(key)).is_some();
    match secret.get("type").and_then(Value::as_str).unwrap_or("Opaque") {
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    errors.push(FieldError::required(format!("data[{key}]")));
                }
            }
        }
        "kubernetes.io/service-account-token" => {
            const ACCOUNT: &str = "kubernetes.io/service-account.name";
            let named = json::at(secret, "/metadata/annotations")
                .and_then(|a| a.get(ACCOUNT))
                .and_then(Value::as_str)
                .is_some_and(|name| !name.is_empty());
            if !named {
                errors.push(FieldError::required(format!("metadata.annotations[{ACCOUNT}]")));
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errors.push(FieldError::required("data[username]"));
            errors.push(FieldError::required("data[password]"));
        }
        "kubernetes.io/ssh-auth"
            if data
                .and_then(|d| d.get("ssh-privatekey"))
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            errors.push(FieldError::required("data[ssh-privatekey]"));
        }
        kind @ ("kubernetes.io/dockerconfigjson" | "kubernetes.io/dockercfg") => {
            let key = match kind {
                "kubernetes.io/dockercfg" => ".dockercfg",
                _ => ".dockerconfigjson",
            };
            let config = data.and_then(|d| d.get(key)).and_then(Value::as_str);
            let Some(config) = config else {
                errors.push(FieldError::required(format!("data[{key}]")));
                return;
            };
            let decoded = base64::engine::general_purpose::STANDARD.decode(config);
            let problem = match decoded {
                Ok(bytes) => json_object_error(&bytes),
                Err(_) => Some("illegal base64 data".into()),
            };
            if let Some(problem) = problem {
                let value = "<secret contents redacted>";
                errors.push(FieldError::invalid(format!("data[{key}]"), value, problem));
            }
        }
        _ => {}
    }
}

/// Kubernetes' `ValidatePodLogOptions`: the ranges of a log request's options, whoever serves
/// it (the API server before it asks the agent, and the agent itself).
pub fn validate_pod_log_options(
    tail_lines: Option<i64>,
    limit_bytes: Option<i64>,
    since_seconds: Option<i64>,
    since_time_given: bool,
) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if let Some(lines) = tail_lines.filter(|n| *n < 0) {
        causes.push(FieldError::invalid_number(
            "tailLines",
            lines,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(bytes) = limit_bytes.filter(|n| *n < 1) {
        causes.push(FieldError::invalid_number("limitBytes", bytes, "must be greater than 0"));
    }
    match since_seconds {
        Some(_) if since_time_given => causes.push(FieldError::forbidden(
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        )),
        Some(seconds) if seconds < 1 => causes.push(FieldError::invalid_number(
            "sinceSeconds",
            seconds,
            "must be greater than 0",
        )),
        _ => {}
    }
    causes
}

/// A claim asks for at least one access mode and an amount of storage.
/// The address types an EndpointSlice may have.
const ADDRESS_TYPES: [&str; 3] = ["IPv4", "IPv6", "FQDN"];

/// An EndpointSlice, as Kubernetes' discovery validation checks it: its address type, at most
/// 1,000 endpoints of 1 to 100 addresses of that type (not unspecified or link-local; loopback
/// ones are kplane's pods'), their node names, hostnames and zone hints, and at most 20,000
/// ports, named once each, with known protocols and qualified `appProtocol`s.
fn validate_endpoint_slice(slice: &Value, errors: &mut Vec<FieldError>) {
    let address_type = slice.get("addressType").and_then(Value::as_str).unwrap_or("");
    if address_type.is_empty() {
        errors.push(FieldError::required("addressType"));
    } else if !ADDRESS_TYPES.contains(&address_type) {
        errors.push(FieldError::not_supported("addressType", address_type, &ADDRESS_TYPES));
    }
    let endpoints = slice.get("endpoints").and_then(Value::as_array);
    if endpoints.is_some_and(|e| e.len() > 1000) {
        errors.push(FieldError::too_many("endpoints", 1000));
    }
    for (i, endpoint) in endpoints.into_iter().flatten().enumerate() {
        let field = format!("endpoints[{i}].addresses");
        let addresses = endpoint.get("addresses").and_then(Value::as_array);
        match addresses.map(Vec::len) {
            None | Some(0) => errors.push(FieldError::required_because(
                field.clone(),
                "must contain at least 1 address",
            )),
            Some(n) if n > 100 => errors.push(FieldError::too_many(field.clone(), 100)),
            _ => {}
        }
        for (j, address) in addresses.into_iter().flatten().enumerate() {
            let text = address.as_str().unwrap_or("");
            let at = || format!("{field}[{j}]");
            let parsed = addresses::parse_ip(text);
            let of_type = match address_type {
                "IPv4" => parsed.is_some_and(|ip| ip.is_ipv4()),
                "IPv6" => parsed.is_some_and(|ip| ip.is_ipv6()),
                _ => dns1123_subdomain_errors(text).is_empty(),
            };
            if !of_type {
                let message = format!("must be a valid {address_type} address");
                errors.push(FieldError::invalid(at(), text, message));
            }
            if matches!(address_type, "IPv4" | "IPv6") {
                match parsed {
                    Some(ip) => addresses::validate_non_special_ip(ip, text, at, errors),
                    None => {
                        errors.push(FieldError::invalid(at(), text, "must be a valid IP address"))
                    }
                }
            }
        }
        let text = |field: &str| endpoint.get(field).and_then(Value::as_str);
        if let Some(node) = text("nodeName") {
            for problem in dns1123_subdomain_errors(node) {
                errors.push(FieldError::invalid(format!("endpoints[{i}].nodeName"), node, problem));
            }
        }
        if let Some(hostname) = text("hostname") {
            for problem in dns1123_label_errors(hostname) {
                let field = format!("endpoints[{i}].hostname");
                errors.push(FieldError::invalid(field, hostname, problem));
            }
        }
        let zones = json::at(endpoint, "/hints/forZones").and_then(Value::as_array);
        if zones.is_some_and(|zones| zones.len() > 8) {
            errors.push(FieldError::too_many(format!("endpoints[{i}].hints.forZones"), 8));
        } else {
            let mut seen = FastSet::default();
            for (j, zone) in zones.into_iter().flatten().enumerate() {
                let name = zone.get("name").and_then(Value::as_str).unwrap_or("");
                let field = || format!("endpoints[{i}].hints.forZones[{j}].name");
                unique_name(name, label_value_errors, &mut seen, field, errors);
            }
        }
    }
    let ports = slice.get("ports").and_then(Value::as_array);
    if ports.is_some_and(|p| p.len() > 20000) {
        errors.push(FieldError::too_many("ports", 20000));
        return;
    }
    let mut names = FastSet::default();
    for (i, port) in ports.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("ports[{i}].{field}");
        // Unnamed ports count as named "": only one may be.
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        let check = if name.is_empty() { |_: &str| Vec::new() } else { dns1123_label_errors };
        unique_name(name, check, &mut names, || at("name"), errors);
        if let Some(protocol) = port.get("protocol").and_then(Value::as_str) {
            port_protocol(protocol, || at("protocol"), errors);
        }
        if let Some(app_protocol) = port.get("appProtocol").and_then(Value::as_str) {
            for problem in label_key_errors(app_protocol) {
                errors.push(FieldError::invalid(at("appProtocol"), app_protocol, problem));
            }
        }
    }
}

fn validate_lease(spec: Option<&Value>, errors: &mut Vec<FieldError>) {
    let ranges = [
        ("leaseDurationSeconds", 1, "must be greater than 0"),
        ("leaseTransitions", 0, "must be greater than or equal to 0"),
    ];
    for (field, least, message) in ranges {
        match spec.and_then(|s| s.get(field)).and_then(Value::as_i64) {
            Some(n) if n < least => {
                errors.push(FieldError::invalid_number(format!("spec.{field}"), n, message))
            }
            _ => {}
        }
    }
}

/// What an ephemeral container may not have (it is never restarted, serves nothing and is
/// given no resources), and the container it targets, which must be one of the pod's.
fn validate_ephemeral_container(
    c: &Value,
    spec: Option<&Value>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    if let Some(target) = c.get("targetContainerName").and_then(Value::as_str) {
        let named = |list: &str| {
            spec.and_then(|s| s.get(list))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|other| other.get("name").and_then(Value::as_str) == Some(target))
        };
        if !named("containers") && !named("initContainers") {
            errors.push(FieldError::not_found(at(".targetContainerName"), target));
        }
    }
    // Kubernetes' allow list, read the other way: what is not on it must be its zero value (a
    // struct with nothing in it; an empty list or map is something, as Go's reflection sees
    // a decoded one), in the order the fields are declared.
    const NOT_ALLOWED: [&str; 8] = [
        "ports",
        "resources",
        "resizePolicy",
        "restartPolicy",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
    ];
    const MESSAGE: &str = "cannot be set for an Ephemeral Container";
    for field in NOT_ALLOWED {
        let set = c.get(field).is_some_and(|v| match v {
            Value::Null => false,
            // A struct (not a pointer to one): set once one of its fields is.
            Value::Object(o) if field == "resources" => o.values().any(|v| !v.is_null()),
            _ => true,
        });
        if set {
            errors.push(FieldError::forbidden(at(&format!(".{field}")), MESSAGE));
        }
    }
    // Sub-paths are bind mounts kept until the pod ends, and mark a container that is part
    // of the workload: refused outright.
    let mounts = c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten();
    for (i, mount) in mounts.enumerate() {
        for field in ["subPath", "subPathExpr"] {
            if mount.get(field).and_then(Value::as_str).is_some_and(|p| !p.is_empty()) {
                let path = at(&format!(".volumeMounts[{i}].{field}"));
                errors.push(FieldError::forbidden(path, MESSAGE));
            }
        }
    }
}

/// A write of the `ephemeralcontainers` subresource: ephemeral containers are only added,
/// never changed or removed (Kubernetes' `ValidatePodEphemeralContainersUpdate`).
pub fn validate_ephemeral_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let list = |pod: &Value| -> Vec<Value> {
        json::at(pod, "/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (list(old), list(new));
    let mut errors = Vec::new();
    for container in &before {
        let name = container.get("name").and_then(Value::as_str).unwrap_or("");
        let detail = match after.iter().find(|c| c.get("name") == container.get("name")) {
            None => "may not be removed",
            Some(now) if now != container => "may not be changed",
            Some(_) => continue,
        };
        let message = format!("existing ephemeral containers {name:?} {detail}");
        errors.push(FieldError::forbidden("spec.ephemeralContainers", message));
    }
    errors
}

/// A pod's spec, or (`of_pod` false) a pod template's, which Kubernetes checks alike but for a
/// few defaults a pod has and a template need not.
fn validate_pod_spec(spec: Option<&Value>, path: &str, of_pod: bool, errors: &mut Vec<FieldError>) {
    let containers = spec.and_then(|s| s.get("containers")).and_then(Value::as_array);
    let containers = containers.map_or(&[][..], Vec::as_slice);
    if containers.is_empty() {
        // (The rest is checked all the same, as in Kubernetes.)
        errors.push(FieldError::required(format!("{path}.containers")));
    }
    let volumes = validate_volumes(spec, path, errors);
    let grace = spec.and_then(|s| s.get("terminationGracePeriodSeconds")).and_then(Value::as_i64);
    let mut seen = FastSet::default();
    let list_of = |field: &str| spec.and_then(|s| s.get(field)).and_then(Value::as_array);
    let (init_containers, ephemeral) = (list_of("initContainers"), list_of("ephemeralContainers"));
    let all = containers.iter().enumerate().map(|(i, c)| ("containers", i, c));
    let init = init_containers.into_iter().flatten().enumerate();
    let ephemeral = ephemeral.into_iter().flatten().enumerate();
    // Containers first: a name an init container repeats is its error, as in Kubernetes.
    let lists = all
        .chain(init.map(|(i, c)| ("initContainers", i, c)))
        .chain(ephemeral.map(|(i, c)| ("ephemeralContainers", i, c)));
    for (list, i, c) in lists {
        // Paths are built only for the errors found: this runs on every pod written.
        let at = |rest: &str| format!("{path}.{list}[{i}]{rest}");
        validate_env_and_user(c, &at, errors);
        validate_container_extras(c, list, grace, &volumes, &at, errors);
        match c.get("name").and_then(Value::as_str) {
            None | Some("") => errors.push(FieldError::required(at(".name"))),
            Some(name) => unique_label(name, &mut seen, || at(".name"), errors),
        }
        match c.get("image").and_then(Value::as_str).unwrap_or("") {
            "" => errors.push(FieldError::required(at(".image"))),
            image if of_pod && image.trim() != image => errors.push(FieldError::invalid(
                at(".image"),
                image,
                "must not have leading or trailing whitespace",
            )),
            _ => {}
        }
        for (j, port) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate()
        {
            let port_path = || at(&format!(".ports[{j}].containerPort"));
            // (Go cannot tell a 0 from a port left out: both are required.)
            match port.get("containerPort").and_then(Value::as_i64).filter(|p| *p != 0) {
                Some(p) => port_number(p, port_path, errors),
                None => errors.push(FieldError::required(port_path())),
            }
            if let Some(protocol) = port.get("protocol").and_then(Value::as_str) {
                port_protocol(protocol, || at(&format!(".ports[{j}].protocol")), errors);
            }
            let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if host_port != 0 {
                port_number(host_port, || at(&format!(".ports[{j}].hostPort")), errors);
            }
        }
        resource_policy::validate_container_resources(c.get("resources"), &at, errors);
        let message_policy = c.get("terminationMessagePolicy").and_then(Value::as_str);
        if let Some(policy) =
            message_policy.filter(|p| !matches!(*p, "File" | "FallbackToLogsOnError"))
        {
            let supported = ["File", "FallbackToLogsOnError"];
            errors.push(FieldError::not_supported(
                at(".terminationMessagePolicy"),
                policy,
                &supported,
            ));
        }
        // A container's own restart policy makes an init container a sidecar, and only that.
        match (list, c.get("restartPolicy").filter(|p| !p.is_null())) {
            ("ephemeralContainers", _) => validate_ephemeral_container(c, spec, &at, errors),
            (_, None) => {}
            ("containers", Some(_)) => errors.push(FieldError::forbidden(
                at(".restartPolicy"),
                "may not be set for non-init containers",
            )),
            (_, Some(policy)) => {
                let policy = policy.as_str().unwrap_or("");
                if policy != "Always" {
                    let field = at(".restartPolicy");
                    errors.push(FieldError::not_supported(field, policy, &["Always"]));
                }
            }
        }
    }
    validate_host_ports(containers, spec, path, of_pod, errors);
    if let Some(policy) = spec.and_then(|s| s.get("restartPolicy")).and_then(Value::as_str) {
        if !matches!(policy, "Always" | "OnFailure" | "Never") {
            errors.push(FieldError::not_supported(
                format!("{path}.restartPolicy"),
                policy,
                &["Always", "OnFailure", "Never"],
            ));
        }
    }
    let text = |field: &str| spec.and_then(|s| s.get(field)).and_then(Value::as_str);
    if let Some(policy) = text("dnsPolicy") {
        const POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
        if !POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported(format!("{path}.dnsPolicy"), policy, &POLICIES));
        }
    }
    if let Some(affinity) = spec.and_then(|s| s.get("affinity")).filter(|a| a.is_object()) {
        validate_affinity(affinity, &format!("{path}.affinity"), errors);
    }
    if let Some(constraints) = list_of("topologySpreadConstraints") {
        validate_topology_spread(constraints, &format!("{path}.topologySpreadConstraints"), errors);
    }
    let node_selector = spec.and_then(|s| s.get("nodeSelector"));
    if node_selector.is_some() {
        validate_labels(node_selector, &format!("{path}.nodeSelector"), errors);
    }
    validate_dns_config(spec, text("dnsPolicy"), path, errors);
    validate_host_aliases(spec.and_then(|s| s.get("hostAliases")), path, errors);
    if let Some(node) = text("nodeName").filter(|n| !n.is_empty()) {
        for problem in dns1123_subdomain_errors(node) {
            errors.push(FieldError::invalid(format!("{path}.nodeName"), node, problem));
        }
    }
    // (A pod's are looked up at admission first; a template's are only checked here.)
    for field in ["serviceAccountName", "priorityClassName"] {
        if let Some(name) = text(field).filter(|n| !n.is_empty()) {
            for problem in dns1123_subdomain_errors(name) {
                errors.push(FieldError::invalid(format!("{path}.{field}"), name, problem));
            }
        }
    }
    if let Some(policy) = text("preemptionPolicy") {
        if !matches!(policy, "PreemptLowerPriority" | "Never") {
            let field = format!("{path}.preemptionPolicy");
            errors.push(FieldError::not_supported(
                field,
                policy,
                &["PreemptLowerPriority", "Never"],
            ));
        }
    }
    if let Some(hostname) = text("hostname").filter(|h| !h.is_empty()) {
        for p in dns1123_label_errors(hostname) {
            errors.push(FieldError::invalid(format!("{path}.hostname"), hostname, p));
        }
    }
    if let Some(subdomain) = text("subdomain").filter(|s| !s.is_empty()) {
        for p in dns1123_label_errors(subdomain) {
            errors.push(FieldError::invalid(format!("{path}.subdomain"), subdomain, p));
        }
    }
    validate_pod_security_context(spec, path, errors);
    let gates = list_of("readinessGates").into_iter().flatten().enumerate();
    for (i, gate) in gates {
        let condition = gate.get("conditionType").and_then(Value::as_str).unwrap_or("");
        for p in label_key_errors(condition) {
            let field = format!("{path}.readinessGates[{i}].conditionType");
            errors.push(FieldError::invalid(field, condition, p));
        }
    }
    if let Some(class) = text("runtimeClassName") {
        for p in dns1123_subdomain_errors(class) {
            errors.push(FieldError::invalid(format!("{path}.runtimeClassName"), class, p));
        }
    }
    if let Some(os) = spec.and_then(|s| s.get("os")).filter(|os| !os.is_null()) {
        match os.get("name").and_then(Value::as_str).unwrap_or("") {
            "" => errors
                .push(FieldError::required_because(format!("{path}.os.name"), "cannot be empty")),
            "linux" | "windows" => {}
            name => {
                let supported = ["linux", "windows"];
                errors.push(FieldError::not_supported(format!("{path}.os"), name, &supported));
            }
        }
    }
    validate_scheduling_gates(spec, path, errors);
    let deadline = spec.and_then(|s| s.get("activeDeadlineSeconds")).and_then(Value::as_i64);
    if let Some(seconds) = deadline.filter(|s| !(1..=i64::from(i32::MAX)).contains(s)) {
        errors.push(FieldError::invalid_number(
            format!("{path}.activeDeadlineSeconds"),
            seconds,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    let tolerations = spec.and_then(|s| s.get("tolerations")).and_then(Value::as_array);
    for (i, toleration) in tolerations.into_iter().flatten().enumerate() {
        let has_value =
            toleration.get("value").and_then(Value::as_str).is_some_and(|v| !v.is_empty());
        let operator = toleration.get("operator").and_then(Value::as_str).unwrap_or("");
        let key = toleration.get("key").and_then(Value::as_str).unwrap_or("");
        if !key.is_empty() {
            for p in label_key_errors(key) {
                errors.push(FieldError::invalid(format!("{path}.tolerations[{i}].key"), key, p));
            }
        } else if operator != "Exists" {
            errors.push(FieldError::invalid(
                format!("{path}.tolerations[{i}].operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values \
                 and all keys\"",
            ));
        }
        if !matches!(operator, "" | "Equal" | "Exists") {
            let field = format!("{path}.tolerations[{i}].operator");
            errors.push(FieldError::not_supported(field, operator, &["Equal", "Exists"]));
        }
        let effect = toleration.get("effect").and_then(Value::as_str).unwrap_or("");
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            let field = format!("{path}.tolerations[{i}].effect");
            errors.push(FieldError::not_supported(field, effect, &TAINT_EFFECTS));
        }
        let value = toleration.get("value").and_then(Value::as_str).unwrap_or("");
        match operator {
            // (Kubernetes names the operator, and joins the value's problems.)
            "" | "Equal" => {
                let problems = label_value_errors(value);
                if !problems.is_empty() {
                    let field = format!("{path}.tolerations[{i}].operator");
                    errors.push(FieldError::invalid(field, value, problems.join(";")));
                }
            }
            "Exists" if has_value => {
                let seconds = match toleration.get("tolerationSeconds").and_then(Value::as_i64) {
                    Some(seconds) => format!("&{seconds}"),
                    None => "(*int64)(nil)".to_string(),
                };
                let printed = format!(
                    "core.Toleration{{Key:{}, Operator:\"Exists\", Value:{}, Effect:{}, \
                     TolerationSeconds:{seconds}}}",
                    go_quote(key),
                    go_quote(value),
                    go_quote(effect),
                );
                errors.push(FieldError::invalid_printed(
                    format!("{path}.tolerations[{i}].operator"),
                    &printed,
                    "value must be empty when `operator` is 'Exists'",
                ));
            }
            _ => {}
        }
        let has_seconds = toleration.get("tolerationSeconds").is_some_and(|s| !s.is_null());
        if has_seconds && effect != "NoExecute" {
            errors.push(FieldError::invalid(
                format!("{path}.tolerations[{i}].effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
}

/// A pod's `affinity`, as Kubernetes' `validateAffinity` checks it: node selector terms (at
/// least one when required; known operators with the values each takes; keys label names),
/// preference weights, and pod (anti-)affinity terms (a topology key, a label selector).
fn validate_affinity(affinity: &Value, path: &str, errors: &mut Vec<FieldError>) {
    const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
    const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";
    fn list(value: Option<&Value>) -> &[Value] {
        value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
    }
    // A preferred term: its weight, and the term it holds under `inner`.
    let preferred = |terms: Option<&Value>,
                     at: &str,
                     inner: &str,
                     check: fn(&Value, &str, &mut Vec<FieldError>),
                     errors: &mut Vec<FieldError>| {
        for (i, term) in list(terms).iter().enumerate() {
            let at = format!("{at}.{PREFERRED}[{i}]");
            let weight = term.get("weight").and_then(Value::as_i64).unwrap_or(0);
            if !(1..=100).contains(&weight) {
                let field = format!("{at}.weight");
                errors.push(FieldError::invalid_number(
                    field,
                    weight,
                    "must be in the range 1-100",
                ));
            }
            check(term.get(inner).unwrap_or(&Value::Null), &format!("{at}.{inner}"), errors);
        }
    };
    if let Some(node) = affinity.get("nodeAffinity") {
        if let Some(required) = node.get(REQUIRED).filter(|r| r.is_object()) {
            let at = format!("{path}.nodeAffinity.{REQUIRED}.nodeSelectorTerms");
            let terms = list(required.get("nodeSelectorTerms"));
            if terms.is_empty() {
                let why = "must have at least one node selector term";
                errors.push(FieldError::required_because(at.clone(), why));
            }
            for (i, term) in terms.iter().enumerate() {
                validate_node_selector_term(term, &format!("{at}[{i}]"), errors);
            }
        }
        let at = format!("{path}.nodeAffinity");
        let check = validate_node_selector_term;
        preferred(node.get(PREFERRED), &at, "preference", check, errors);
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pod) = affinity.get(kind) else { continue };
        for (i, term) in list(pod.get(REQUIRED)).iter().enumerate() {
            validate_pod_affinity_term(term, &format!("{path}.{kind}.{REQUIRED}[{i}]"), errors);
        }
        let at = format!("{path}.{kind}");
        let check = validate_pod_affinity_term;
        preferred(pod.get(PREFERRED), &at, "podAffinityTerm", check, errors);
    }
}

/// The host ports of a pod's containers (Kubernetes' `checkHostPortConflicts`: one
/// protocol, address and port taken once) and, on the host's network, each equal to its
/// container port (a template's may be unset: only a pod's is defaulted to it).
fn validate_host_ports(
    containers: &[Value],
    spec: Option<&Value>,
    path: &str,
    of_pod: bool,
    errors: &mut Vec<FieldError>,
) {
    let host_network = spec.and_then(|s| s.get("hostNetwork")).and_then(Value::as_bool);
    let mut taken: Vec<String> = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        let ports = c.get("ports").and_then(Value::as_array);
        for (j, port) in ports.into_iter().flatten().enumerate() {
            let number = |field: &str| port.get(field).and_then(Value::as_i64).unwrap_or(0);
            let text = |field: &str| port.get(field).and_then(Value::as_str).unwrap_or("");
            let at = || format!("{path}.containers[{i}].ports[{j}].hostPort");
            let host_port = number("hostPort");
            let checked = of_pod || host_port != 0;
            if host_network == Some(true) && checked && host_port != number("containerPort") {
                let why = "must match `containerPort` when `hostNetwork` is true";
                errors.push(FieldError::invalid_number(at(), host_port, why));
            }
            if host_port == 0 {
                continue;
            }
            let key = format!("{}/{}/{host_port}", text("protocol"), text("hostIP"));
            if taken.contains(&key) {
                errors.push(FieldError::duplicate(at(), &key));
            } else {
                taken.push(key);
            }
        }
    }
}

/// A pod's `topologySpreadConstraints`, as Kubernetes' `validateTopologySpreadConstraints`
/// checks them.
fn validate_topology_spread(constraints: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    const NOT_POSITIVE: &str = "must be greater than zero";
    const ACTIONS: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];
    const POLICIES: [&str; 2] = ["Honor", "Ignore"];
    fn text<'a>(c: &'a Value, field: &str) -> &'a str {
        c.get(field).and_then(Value::as_str).unwrap_or("")
    }
    for (i, constraint) in constraints.iter().enumerate() {
        let at = |field: &str| format!("{path}[{i}].{field}");
        let max_skew = constraint.get("maxSkew").and_then(Value::as_i64).unwrap_or(0);
        if max_skew <= 0 {
            errors.push(FieldError::invalid_number(at("maxSkew"), max_skew, NOT_POSITIVE));
        }
        let key = text(constraint, "topologyKey");
        if key.is_empty() {
            errors.push(FieldError::required_because(at("topologyKey"), "can not be empty"));
        }
        let action = text(constraint, "whenUnsatisfiable");
        if !ACTIONS.contains(&action) {
            errors.push(FieldError::not_supported(at("whenUnsatisfiable"), action, &ACTIONS));
        }
        // A (key, action) pair is one kind of constraint: the first of two alike is the error.
        let repeated = constraints[i + 1..]
            .iter()
            .any(|c| text(c, "topologyKey") == key && text(c, "whenUnsatisfiable") == action);
        if repeated {
            let field = at("{topologyKey, whenUnsatisfiable}");
            errors.push(FieldError::duplicate(field, &format!("{{{key}, {action}}}")));
        }
        if let Some(domains) = constraint.get("minDomains").and_then(Value::as_i64) {
            if domains <= 0 {
                errors.push(FieldError::invalid_number(at("minDomains"), domains, NOT_POSITIVE));
            }
            if action != "DoNotSchedule" {
                let why = format!(
                    "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                );
                errors.push(FieldError::invalid_number(at("minDomains"), domains, why));
            }
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(value) = constraint.get(policy).and_then(Value::as_str) {
                if !POLICIES.contains(&value) {
                    errors.push(FieldError::not_supported(at(policy), value, &POLICIES));
                }
            }
        }
        let selector = constraint.get("labelSelector").filter(|s| s.is_object());
        let keys = constraint.get("matchLabelKeys").and_then(Value::as_array);
        let keys: Vec<&str> = keys.into_iter().flatten().filter_map(Value::as_str).collect();
        if !keys.is_empty() && selector.is_none() {
            let why = "must not be specified when labelSelector is not set";
            errors.push(FieldError::forbidden(at("matchLabelKeys"), why));
        }
        let selector_keys: Vec<&str> = selector
            .and_then(|s| s.get("matchLabels")?.as_object())
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
            .chain(
                selector
                    .and_then(|s| s.get("matchExpressions")?.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.get("key")?.as_str()),
            )
            .collect();
        for (j, key) in keys.iter().enumerate() {
            let field = || at(&format!("matchLabelKeys[{j}]"));
            for problem in label_key_errors(key) {
                errors.push(FieldError::invalid(field(), key, problem));
            }
            if selector_keys.contains(key) {
                let why = "exists in both matchLabelKeys and labelSelector";
                errors.push(FieldError::invalid(field(), key, why));
            }
        }
        if let Some(selector) = selector {
            validate_label_selector(selector, &at("labelSelector"), errors);
        }
    }
}

/// One node selector term's `matchExpressions` (Kubernetes' `ValidateNodeSelectorRequirement`).
pub(super) fn validate_node_selector_term(term: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let expressions = term.get("matchExpressions").and_then(Value::as_array);
    for (j, requirement) in expressions.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("{path}.matchExpressions[{j}].{field}");
        let values = requirement.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        let operator = requirement.get("operator").and_then(Value::as_str).unwrap_or("");
        selector_operator(operator, values, true, &at, errors);
        let key = requirement.get("key").and_then(Value::as_str).unwrap_or("");
        for problem in label_key_errors(key) {
            errors.push(FieldError::invalid(at("key"), key, problem));
        }
    }
    // Kubernetes' `validateNodeFieldSelectorRequirement`: a node's name, In or NotIn one.
    let fields = term.get("matchFields").and_then(Value::as_array);
    for (j, requirement) in fields.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("{path}.matchFields[{j}].{field}");
        let values = requirement.get("values").and_then(Value::as_array);
        let values: Vec<&str> = values.into_iter().flatten().filter_map(Value::as_str).collect();
        match requirement.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" | "NotIn" if values.len() == 1 => {}
            "In" | "NotIn" => errors.push(FieldError::required_because(
                at("values"),
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )),
            other => errors.push(FieldError::invalid(
                at("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = requirement.get("key").and_then(Value::as_str).unwrap_or("");
        if key != "metadata.name" {
            errors.push(FieldError::invalid(at("key"), key, "not a valid field selector key"));
            continue;
        }
        for (k, value) in values.iter().enumerate() {
            for problem in dns1123_subdomain_errors(value) {
                errors.push(FieldError::invalid(at(&format!("values[{k}]")), value, problem));
            }
        }
    }
}

/// A pod (anti-)affinity term (Kubernetes' `validatePodAffinityTerm`): its label selector, and
/// a topology key that is a label name.
fn validate_pod_affinity_term(term: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(selector) = term.get("labelSelector").filter(|s| s.is_object()) {
        validate_label_selector(selector, &format!("{path}.labelSelector"), errors);
    }
    let key = term.get("topologyKey").and_then(Value::as_str).unwrap_or("");
    if key.is_empty() {
        errors
            .push(FieldError::required_because(format!("{path}.topologyKey"), "can not be empty"));
    }
    for problem in label_key_errors(key) {
        errors.push(FieldError::invalid(format!("{path}.topologyKey"), key, problem));
    }
    if let Some(selector) = term.get("namespaceSelector").filter(|s| s.is_object()) {
        validate_label_selector(selector, &format!("{path}.namespaceSelector"), errors);
    }
    let namespaces = term.get("namespaces").and_then(Value::as_array);
    for name in namespaces.into_iter().flatten().filter_map(Value::as_str) {
        for problem in dns1123_label_errors(name) {
            errors.push(FieldError::invalid(format!("{path}.namespace"), name, problem));
        }
    }
    // Kubernetes' `validateMatchLabelKeysAndMismatchLabelKeys`.
    let keys = |field: &str| -> Vec<&str> {
        let listed = term.get(field).and_then(Value::as_array);
        listed.into_iter().flatten().filter_map(Value::as_str).collect()
    };
    let (matching, mismatching) = (keys("matchLabelKeys"), keys("mismatchLabelKeys"));
    if !term.get("labelSelector").is_some_and(Value::is_object) {
        for (field, listed) in [("matchLabelKeys", &matching), ("mismatchLabelKeys", &mismatching)]
        {
            if !listed.is_empty() {
                let why = "must not be specified when labelSelector is not set";
                errors.push(FieldError::forbidden(format!("{path}.{field}"), why));
            }
        }
        return;
    }
    for (field, listed) in [("matchLabelKeys", &matching), ("mismatchLabelKeys", &mismatching)] {
        for (i, key) in listed.iter().enumerate() {
            for problem in label_key_errors(key) {
                errors.push(FieldError::invalid(format!("{path}.{field}[{i}]"), key, problem));
            }
        }
    }
    for (i, key) in matching.iter().enumerate().filter(|(_, k)| mismatching.contains(k)) {
        let why = "exists in both matchLabelKeys and mismatchLabelKeys";
        errors.push(FieldError::invalid(format!("{path}.matchLabelKeys[{i}]"), key, why));
    }
}

/// A pod's security context (`validatePodSpecSecurityContext`): user and group ids, process
/// namespace sharing without the host's, and sysctl names.
fn validate_pod_security_context(spec: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    let context = spec.and_then(|s| s.get("securityContext"));
    let at = |field: &str| format!("{path}.securityContext.{field}");
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        user_id(context.and_then(|c| c.get(field)), || at(field), errors);
    }
    let groups = context.and_then(|c| c.get("supplementalGroups")).and_then(Value::as_array);
    for (i, group) in groups.into_iter().flatten().enumerate() {
        user_id(Some(group), || at(&format!("supplementalGroups[{i}]")), errors);
    }
    if let Some(context) = context {
        security_context::validate_profiles(context, &at, errors);
        security_context::validate_fs_group_change_policy(context, &at, errors);
    }
    let flag = |field: &str| spec.and_then(|s| s.get(field)) == Some(&Value::Bool(true));
    if flag("shareProcessNamespace") && flag("hostPID") {
        // Kubernetes' internal type keeps both in the security context, and names it there.
        let message = "ShareProcessNamespace and HostPID cannot both be enabled";
        errors.push(FieldError::invalid_number(at("shareProcessNamespace"), true, message));
    }
    let sysctls = context.and_then(|c| c.get("sysctls")).and_then(Value::as_array);
    let mut names = FastSet::default();
    for (i, sysctl) in sysctls.into_iter().flatten().enumerate() {
        let field = || at(&format!("sysctls[{i}].name"));
        let name = sysctl.get("name").and_then(Value::as_str).unwrap_or("");
        match name {
            "" => errors.push(FieldError::required(field())),
            name if !is_sysctl_name(name) => errors.push(FieldError::invalid(
                field(),
                name,
                "must have at most 253 characters and match regex \
                 ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
            )),
            name if !names.insert(name) => errors.push(FieldError::duplicate(field(), name)),
            _ => {}
        }
        // A sysctl of a namespace the pod shares with the host would set the host's.
        let shared = match sysctl::Namespace::of(&sysctl::normalized(name)) {
            Some(sysctl::Namespace::Net) if flag("hostNetwork") => Some("hostNetwork"),
            Some(sysctl::Namespace::Ipc) if flag("hostIPC") => Some("hostIPC"),
            _ => None,
        };
        if let Some(host) = shared {
            let message = format!("may not be specified when '{host}' is true");
            errors.push(FieldError::invalid(field(), name, message));
        }
    }
}

/// A sysctl name: segments of lowercase letters, digits, `-` and `_` (starting and ending
/// with a letter or digit), separated by `.` or `/`, 253 characters at most.
fn is_sysctl_name(name: &str) -> bool {
    name.len() <= 253
        && name.split(['.', '/']).all(|segment| {
            let b = segment.as_bytes();
            !b.is_empty()
                && b.iter().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_')
                })
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
        })
}

/// A node's capacity and allocatable amounts (`ValidateNodeResources`): none negative, and
/// whole numbers of the resources counted in units (pods, extended resources).
fn validate_node_resources(node: &Value, errors: &mut Vec<FieldError>) {
    for list in ["capacity", "allocatable"] {
        let amounts = json::at(node, &format!("/status/{list}")).and_then(Value::as_object);
        for (resource, amount) in amounts.into_iter().flatten() {
            let amount = amount.as_str().unwrap_or("0");
            let field = || format!("status.{list}.{resource}");
            if quantity::compare(amount, "0") == Some(Ordering::Less) {
                let message = "must be greater than or equal to 0";
                errors.push(FieldError::invalid(field(), amount, message));
            }
            let counted = resource == "pods" || resource.contains('/');
            let whole = quantity::milli_value(amount).is_ok_and(|milli| milli % 1000 == 0);
            if counted && !whole {
                errors.push(FieldError::invalid(field(), amount, "must be an integer"));
            }
        }
    }
}

/// A node's pod networks (`spec.podCIDR` is the first of `spec.podCIDRs`, and Kubernetes names
/// the list in its errors): CIDRs, at most one of each family, none twice.
fn validate_pod_cidrs(node: &Value, errors: &mut Vec<FieldError>) {
    let spec = node.get("spec");
    let mut cidrs = spec.map(|s| json::strings(s, "podCIDRs")).unwrap_or_default();
    let single = spec.and_then(|s| s.get("podCIDR")).and_then(Value::as_str).unwrap_or("");
    if !single.is_empty() && cidrs.first().map(String::as_str) != Some(single) {
        cidrs = vec![single.to_string()];
    }
    for (i, cidr) in cidrs.iter().enumerate() {
        addresses::validate_cidr(cidr, || format!("spec.podCIDRs[{i}]"), errors);
    }
    if cidrs.len() < 2 {
        return;
    }
    let v6 = |cidr: &String| cidr.contains(':');
    if cidrs.len() > 2 || v6(&cidrs[0]) == v6(&cidrs[1]) {
        errors.push(FieldError::invalid_printed(
            "spec.podCIDRs",
            &go_strings(&cidrs),
            "may specify no more than one CIDR for each IP family",
        ));
    }
    let mut seen = FastSet::default();
    for (i, cidr) in cidrs.iter().enumerate() {
        if !seen.insert(cidr) {
            errors.push(FieldError::duplicate(format!("spec.podCIDRs[{i}]"), cidr));
        }
    }
}

/// The types of a pod's conditions other than the kubelet's first three are qualified names,
/// as Kubernetes' `validatePodConditions` checks them (naming the field `Type`).
fn validate_pod_conditions(conditions: Option<&Value>, errors: &mut Vec<FieldError>) {
    const SYSTEM: [&str; 3] = ["PodScheduled", "Ready", "Initialized"];
    let conditions = conditions.and_then(Value::as_array).into_iter().flatten();
    for (i, condition) in conditions.enumerate() {
        let kind = condition.get("type").and_then(Value::as_str).unwrap_or("");
        if SYSTEM.contains(&kind) {
            continue;
        }
        for problem in label_key_errors(kind) {
            errors.push(FieldError::invalid(format!("status.conditions[{i}].Type"), kind, problem));
        }
    }
}

/// `metav1.Condition`s (a budget's status), as Kubernetes' `ValidateConditions` checks them:
/// each type a qualified name and unique, a status of True, False or Unknown, a transition
/// time, a reason of letters, digits and `_,:`, and bounded lengths.
pub(super) fn validate_conditions(
    conditions: Option<&Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    const STATUSES: [&str; 3] = ["False", "True", "Unknown"];
    const REASON_MAX: usize = 1024;
    const MESSAGE_MAX: usize = 32 * 1024;
    let mut seen = FastSet::default();
    let conditions = conditions.and_then(Value::as_array).into_iter().flatten();
    for (i, condition) in conditions.enumerate() {
        let at = format!("{path}[{i}]");
        let text = |field: &str| condition.get(field).and_then(Value::as_str).unwrap_or("");
        let kind = text("type");
        if !seen.insert(kind) {
            errors.push(FieldError::duplicate(format!("{at}.type"), kind));
        }
        for problem in label_key_errors(kind) {
            errors.push(FieldError::invalid(format!("{at}.type"), kind, problem));
        }
        let status = text("status");
        if !STATUSES.contains(&status) {
            errors.push(FieldError::not_supported(format!("{at}.status"), status, &STATUSES));
        }
        let generation = condition.get("observedGeneration").and_then(Value::as_i64);
        if let Some(negative) = generation.filter(|g| *g < 0) {
            let message = "must be greater than or equal to zero";
            errors.push(FieldError::invalid_number(
                format!("{at}.observedGeneration"),
                negative,
                message,
            ));
        }
        if text("lastTransitionTime").is_empty() {
            errors.push(FieldError::required_because(
                format!("{at}.lastTransitionTime"),
                "must be set",
            ));
        }
        let reason = text("reason");
        if reason.is_empty() {
            errors.push(FieldError::required_because(format!("{at}.reason"), "must be set"));
        } else {
            if !is_condition_reason(reason) {
                errors.push(FieldError::invalid(
                    format!("{at}.reason"),
                    reason,
                    CONDITION_REASON_MSG,
                ));
            }
            if reason.len() > REASON_MAX {
                errors.push(FieldError::too_long(format!("{at}.reason"), REASON_MAX));
            }
        }
        if text("message").len() > MESSAGE_MAX {
            errors.push(FieldError::too_long(format!("{at}.message"), MESSAGE_MAX));
        }
    }
}

/// Kubernetes' message for a condition reason that does not match `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`.
const CONDITION_REASON_MSG: &str = "a condition reason must start with alphabetic character, \
optionally followed by a string of alphanumeric characters or '_,:', and must end with an \
alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or \
'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is \
'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')";

fn is_condition_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    let last = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.iter().all(inner)
        && bytes.last().is_some_and(last)
}

/// A pod's `status.podIPs` or `status.hostIPs`, as Kubernetes' `validatePodIPs` and
/// `validateHostIPs` check them: addresses, at most one of each family, none twice.
fn validate_pod_ips(ips: Option<&Value>, list: &str, errors: &mut Vec<FieldError>) {
    let ips: Vec<&str> = ips
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|entry| entry.get("ip").and_then(Value::as_str).unwrap_or(""))
        .collect();
    for (i, ip) in ips.iter().enumerate() {
        validate_ip(ip, || format!("status.{list}[{i}]"), errors);
    }
    if ips.len() < 2 {
        return;
    }
    // As Go prints a `core.PodIP` (or `core.HostIP`).
    let kind = if list == "podIPs" { "PodIP" } else { "HostIP" };
    let printed = |ip: &str| format!("core.{kind}{{IP:{ip:?}}}");
    if ips.len() > 2 || ips[0].contains(':') == ips[1].contains(':') {
        let all: Vec<String> = ips.iter().map(|ip| printed(ip)).collect();
        errors.push(FieldError::invalid_printed(
            format!("status.{list}"),
            &format!("[]core.{kind}{{{}}}", all.join(", ")),
            "may specify no more than one IP for each IP family",
        ));
    }
    let mut seen = FastSet::default();
    for (i, ip) in ips.iter().enumerate() {
        if !seen.insert(ip) {
            let field = format!("status.{list}[{i}]");
            errors.push(FieldError::duplicate_struct(field, &printed(ip), None));
        }
    }
}

/// A list of strings as Go's `%#v` prints it in a message (`[]string{"a", "b"}`).
pub(crate) fn go_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| go_quote(item)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A string map as Go's `%#v` prints it (`map[string]string{"a":"1", "b":"2"}`, keys sorted;
/// `map[string]string(nil)` for none), as Kubernetes' messages show a map value.
fn go_string_map(map: Option<&serde_json::Map<String, Value>>) -> String {
    let Some(map) = map else { return "map[string]string(nil)".into() };
    let mut pairs: Vec<(&String, &str)> =
        map.iter().map(|(k, v)| (k, v.as_str().unwrap_or(""))).collect();
    pairs.sort();
    let printed: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v))).collect();
    format!("map[string]string{{{}}}", printed.join(", "))
}

/// The most nameservers, search paths and search-list characters a pod's `dnsConfig` may
/// have (Kubernetes' `MaxDNSNameservers`, `MaxDNSSearchPaths`, `MaxDNSSearchListChars`).
const MAX_DNS_NAMESERVERS: usize = 3;
const MAX_DNS_SEARCH_PATHS: usize = 32;
const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;

/// A pod's `dnsConfig`, as Kubernetes' `validatePodDNSConfig` checks it: required, with a
/// nameserver, under the `None` policy; nameservers IP addresses, search paths subdomains
/// (a trailing dot allowed), options named; each list within its bounds.
fn validate_dns_config(
    spec: Option<&Value>,
    policy: Option<&str>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let config = spec.and_then(|s| s.get("dnsConfig")).filter(|c| !c.is_null());
    let nameservers = config.map(|c| json::strings(c, "nameservers")).unwrap_or_default();
    if policy == Some("None") {
        let missing = match config {
            None => Some(("dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None")),
            Some(_) if nameservers.is_empty() => Some((
                "dnsConfig.nameservers",
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )),
            Some(_) => None,
        };
        if let Some((field, message)) = missing {
            errors.push(FieldError::required_because(format!("{path}.{field}"), message));
            return;
        }
    }
    let Some(config) = config else { return };
    let at = |rest: &str| format!("{path}.dnsConfig.{rest}");
    if nameservers.len() > MAX_DNS_NAMESERVERS {
        let message = format!("must not have more than {MAX_DNS_NAMESERVERS} nameservers");
        errors.push(FieldError::invalid_number(
            at("nameservers"),
            go_strings(&nameservers),
            message,
        ));
    }
    for (i, nameserver) in nameservers.iter().enumerate() {
        validate_ip(nameserver, || at(&format!("nameservers[{i}]")), errors);
    }
    let searches = json::strings(config, "searches");
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        let message = format!("must not have more than {MAX_DNS_SEARCH_PATHS} search paths");
        errors.push(FieldError::invalid_number(at("searches"), go_strings(&searches), message));
    }
    if searches.join(" ").len() > MAX_DNS_SEARCH_LIST_CHARS {
        let message = format!(
            "must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) \
             in the search list"
        );
        errors.push(FieldError::invalid_number(at("searches"), go_strings(&searches), message));
    }
    for (i, search) in searches.iter().enumerate() {
        let search = search.strip_suffix('.').unwrap_or(search);
        for problem in dns1123_subdomain_errors(search) {
            errors.push(FieldError::invalid(at(&format!("searches[{i}]")), search, problem));
        }
    }
    let options = config.get("options").and_then(Value::as_array).into_iter().flatten();
    for (i, option) in options.enumerate() {
        if option.get("name").and_then(Value::as_str).unwrap_or("").is_empty() {
            errors.push(FieldError::required_because(
                at(&format!("options[{i}]")),
                "must not be empty",
            ));
        }
    }
}

/// A pod's `hostAliases` (Kubernetes' `ValidateHostAliases`): each an IP address with
/// hostnames that are subdomains.
fn validate_host_aliases(aliases: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    for (i, alias) in aliases.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let ip = alias.get("ip").and_then(Value::as_str).unwrap_or("");
        validate_ip(ip, || format!("{path}.hostAliases[{i}].ip"), errors);
        for (j, hostname) in json::strings(alias, "hostnames").iter().enumerate() {
            for problem in dns1123_subdomain_errors(hostname) {
                let field = format!("{path}.hostAliases[{i}].hostnames[{j}]");
                errors.push(FieldError::invalid(field, hostname, problem));
            }
        }
    }
}

/// The effects a taint, and a toleration of one, may have.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A node's taints: each has a key (a qualified name) and a known effect. Kubernetes names
/// them `metadata.taints[i]` in its messages (its node validation's path starts at
/// `metadata`), and so does this.
fn validate_taints(taints: Option<&Value>, errors: &mut Vec<FieldError>) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in taints.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let key = taint.get("key").and_then(Value::as_str).unwrap_or("");
        for p in label_key_errors(key) {
            errors.push(FieldError::invalid(format!("metadata.taints[{i}].key"), key, p));
        }
        let field = || format!("metadata.taints[{i}].effect");
        let effect = taint.get("effect").and_then(Value::as_str).unwrap_or("");
        match effect {
            "" => errors.push(FieldError::required(field())),
            effect if !TAINT_EFFECTS.contains(&effect) => {
                errors.push(FieldError::not_supported(field(), effect, &TAINT_EFFECTS))
            }
            _ => {}
        }
        if seen.contains(&(key, effect)) {
            // As Kubernetes prints the taint: its Go struct (`%#v`; a time it holds is a
            // pointer, which Go prints as an address, here as the time).
            let value = taint.get("value").and_then(Value::as_str).unwrap_or("");
            let added = taint.get("timeAdded").and_then(Value::as_str).unwrap_or("nil");
            let printed = format!(
                "core.Taint{{Key:{key:?}, Value:{value:?}, Effect:{effect:?}, \
                 TimeAdded:(*v1.Time)({added})}}"
            );
            let detail = Some("taints must be unique by key and effect pair");
            let field = format!("metadata.taints[{i}]");
            errors.push(FieldError::duplicate_struct(field, &printed, detail));
        }
        seen.push((key, effect));
    }
}

/// A container's environment variables (names, and one source for a value from elsewhere)
/// and its user id.
fn validate_env_and_user(c: &Value, at: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    env::validate(c, at, errors);
    validate_container_security_context(c.get("securityContext"), at, errors);
}

/// A container's security context (`ValidateSecurityContext`): its user and group ids, and no
/// privilege that `allowPrivilegeEscalation: false` would contradict.
fn validate_container_security_context(
    context: Option<&Value>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let Some(context) = context else { return };
    for field in ["runAsUser", "runAsGroup"] {
        user_id(context.get(field), || at(&format!(".securityContext.{field}")), errors);
    }
    let under = |field: &str| at(&format!(".securityContext.{field}"));
    security_context::validate_profiles(context, &under, errors);
    security_context::validate_proc_mount(context, &under, errors);
    if context.get("allowPrivilegeEscalation") != Some(&Value::Bool(false)) {
        return;
    }
    let field = || at(".securityContext");
    if context.get("privileged") == Some(&Value::Bool(true)) {
        let message = "cannot set `allowPrivilegeEscalation` to false and `privileged` to true";
        errors.push(FieldError::invalid(field(), "", message));
    }
    let added = json::at(context, "/capabilities/add").and_then(Value::as_array);
    if added.into_iter().flatten().any(|c| c == "CAP_SYS_ADMIN") {
        let message =
            "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN";
        errors.push(FieldError::invalid(field(), "", message));
    }
}

/// The pod fields an environment variable may take its value from (besides a label or an
/// annotation, by key).
pub(super) const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// The pod fields a downward API volume's file may hold.
const VOLUME_FIELD_PATHS: [&str; 5] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

/// A `fieldRef` (Kubernetes' `validateObjectFieldSelector`): a `v1` field path among `paths`,
/// or one label or annotation by key (`metadata.labels['app']`).
pub(super) fn validate_field_ref(
    field_ref: &Value,
    paths: &[&str],
    at: &dyn Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    let text = |field: &str| field_ref.get(field).and_then(Value::as_str).unwrap_or("");
    let (version, path) = (text("apiVersion"), text("fieldPath"));
    if version.is_empty() {
        return errors.push(FieldError::required(format!("{}.apiVersion", at())));
    }
    if path.is_empty() {
        return errors.push(FieldError::required(format!("{}.fieldPath", at())));
    }
    // Kubernetes' `ConvertDownwardAPIFieldLabel`: the v1 field labels a pod has.
    const POD_FIELD_LABELS: [&str; 14] = [
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    ];
    let subscripted = path
        .strip_suffix("']")
        .and_then(|p| p.split_once("['"))
        .filter(|(field, _)| !field.is_empty());
    let converted = if version != "v1" {
        Err(format!("unsupported pod version: {version}"))
    } else {
        match subscripted {
            Some(("metadata.annotations" | "metadata.labels", _)) => Ok(path),
            Some(_) => Err(format!("field label does not support subscript: {path}")),
            None if POD_FIELD_LABELS.contains(&path) => Ok(path),
            None if path == "spec.host" => Ok("spec.nodeName"),
            None => Err(format!("field label not supported: {path}")),
        }
    };
    let path = match converted {
        Ok(path) => path,
        Err(why) => {
            let field = format!("{}.fieldPath", at());
            let message = format!("error converting fieldPath: {why}");
            return errors.push(FieldError::invalid(field, path, message));
        }
    };
    match subscripted {
        Some(("metadata.annotations", key)) => {
            for problem in label_key_errors(&key.to_lowercase()) {
                errors.push(FieldError::invalid(at(), &key.to_lowercase(), problem));
            }
        }
        Some((_, key)) => {
            for problem in label_key_errors(key) {
                errors.push(FieldError::invalid(at(), key, problem));
            }
        }
        None if !paths.contains(&path) => {
            errors.push(FieldError::not_supported(format!("{}.fieldPath", at()), path, paths))
        }
        None => {}
    }
}

/// What is wrong with a path inside a volume (Kubernetes' `validateLocalDescendingPath`: a
/// relative path without `..` steps; `non_reserved`: `validateLocalNonReservedPath`, which
/// also refuses a first step starting with `..`).
fn local_path_errors(path: &str, non_reserved: bool) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if path.starts_with('/') {
        problems.push("must be a relative path");
    }
    if path.split('/').any(|step| step == "..") {
        problems.push("must not contain '..'");
    } else if non_reserved && path.starts_with("..") {
        problems.push("must not start with '..'");
    }
    problems
}

/// The `items` of a volume source (a secret's, a config map's, the downward API's, or a
/// projection's): each a path inside the volume, and, but for the downward API's, a key.
fn validate_items(source: &Value, keyed: bool, at: &str, errors: &mut Vec<FieldError>) {
    let items = source.get("items").and_then(Value::as_array);
    for (i, item) in items.into_iter().flatten().enumerate() {
        let field = |name: &str| format!("{at}.items[{i}].{name}");
        if keyed && item.get("key").and_then(Value::as_str).unwrap_or("").is_empty() {
            errors.push(FieldError::required(field("key")));
        }
        match item.get("path").and_then(Value::as_str).unwrap_or("") {
            "" => errors.push(FieldError::required(field("path"))),
            path => {
                for problem in local_path_errors(path, true) {
                    errors.push(FieldError::invalid(field("path"), path, problem));
                }
            }
        }
        let mode = item.get("mode").and_then(Value::as_i64);
        if let Some(mode) = mode.filter(|m| !(0..=0o777).contains(m)) {
            errors.push(FieldError::invalid_number(field("mode"), mode, FILE_MODE_MSG));
        }
    }
}

/// A `hostPath` source (a pod's volume, a persistent volume's): a path without `..` steps,
/// and a known type.
fn validate_host_path(source: &Value, at: &str, errors: &mut Vec<FieldError>) {
    const TYPES: [&str; 8] = [
        "",
        "BlockDevice",
        "CharDevice",
        "Directory",
        "DirectoryOrCreate",
        "File",
        "FileOrCreate",
        "Socket",
    ];
    let path = source.get("path").and_then(Value::as_str).unwrap_or("");
    if path.is_empty() {
        return errors.push(FieldError::required(format!("{at}.path")));
    }
    if path.split('/').any(|step| step == "..") {
        errors.push(FieldError::invalid(format!("{at}.path"), path, "must not contain '..'"));
    }
    if let Some(kind) = source.get("type").and_then(Value::as_str) {
        if !TYPES.contains(&kind) {
            errors.push(FieldError::not_supported(format!("{at}.type"), kind, &TYPES));
        }
    }
}

/// A user id, when given, is between 0 and 2147483647.
fn user_id(id: Option<&Value>, field: impl FnOnce() -> String, errors: &mut Vec<FieldError>) {
    if let Some(id) =
        id.and_then(Value::as_i64).filter(|id| !(0..=i64::from(i32::MAX)).contains(id))
    {
        errors.push(FieldError::invalid_number(
            field(),
            id,
            "must be between 0 and 2147483647, inclusive",
        ));
    }
}

/// A name that must be a DNS-1123 label and not one of `seen` (which it joins); `field`
/// names it in the errors, built only when there is one.
fn unique_label<'a>(
    name: &'a str,
    seen: &mut FastSet<&'a str>,
    field: impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    unique_name(name, dns1123_label_errors, seen, field, errors);
}

/// A name that `check` accepts, not repeated among those `seen`.
fn unique_name<'a>(
    name: &'a str,
    check: fn(&str) -> Vec<String>,
    seen: &mut FastSet<&'a str>,
    field: impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    for problem in check(name) {
        errors.push(FieldError::invalid(field(), name, problem));
    }
    if !seen.insert(name) {
        errors.push(FieldError::duplicate(field(), name));
    }
}

/// The pod's volume names, each checked (a DNS-1123 label, not repeated).
fn validate_volumes<'a>(
    spec: Option<&'a Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> FastSet<&'a str> {
    let mut names = FastSet::default();
    let volumes = spec.and_then(|s| s.get("volumes")).and_then(Value::as_array);
    for (i, volume) in volumes.into_iter().flatten().enumerate() {
        let field = || format!("{path}.volumes[{i}].name");
        match volume.get("name").and_then(Value::as_str) {
            None | Some("") => errors.push(FieldError::required(field())),
            Some(name) => unique_label(name, &mut names, field, errors),
        }
        validate_volume_source(volume, &|rest| format!("{path}.volumes[{i}].{rest}"), errors);
    }
    names
}

/// A volume's sources, in the order Kubernetes' `validateVolumeSource` looks at them.
const VOLUME_SOURCES: [&str; 29] = [
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "quobyte",
    "cinder",
    "cephfs",
    "downwardAPI",
    "fc",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "configMap",
    "scaleIO",
    "projected",
    "csi",
    "ephemeral",
    "image",
];

const FILE_MODE_MSG: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// One source per volume, as Kubernetes counts them (each after the first is Forbidden), and
/// what the secret and config map sources need: the object's name, file modes in range.
fn validate_volume_source(
    volume: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let mut given =
        VOLUME_SOURCES.iter().filter(|source| volume.get(**source).is_some_and(|v| !v.is_null()));
    // Only the first is checked further; each other is refused.
    let first = given.next().copied();
    for source in given {
        errors.push(FieldError::forbidden(at(source), "may not specify more than 1 volume type"));
    }
    let mode = |source: &str, errors: &mut Vec<FieldError>| {
        let mode = volume.get(source).and_then(|s| s.get("defaultMode")).and_then(Value::as_i64);
        if let Some(mode) = mode.filter(|m| !(0..=0o777).contains(m)) {
            let field = at(&format!("{source}.defaultMode"));
            errors.push(FieldError::invalid_number(field, mode, FILE_MODE_MSG));
        }
    };
    if let Some(secret) = volume.get("secret").filter(|_| first == Some("secret")) {
        if secret.get("secretName").and_then(Value::as_str).unwrap_or("").is_empty() {
            errors.push(FieldError::required(at("secret.secretName")));
        }
        mode("secret", errors);
    }
    if let Some(config_map) = volume.get("configMap").filter(|_| first == Some("configMap")) {
        if config_map.get("name").and_then(Value::as_str).unwrap_or("").is_empty() {
            errors.push(FieldError::required(at("configMap.name")));
        }
        mode("configMap", errors);
    }
    let source = first.and_then(|first| Some((first, volume.get(first)?)));
    if let Some((kind @ ("secret" | "configMap" | "downwardAPI"), items)) = source {
        validate_items(items, kind != "downwardAPI", &at(kind), errors);
    }
    match source {
        Some(("hostPath", host_path)) => validate_host_path(host_path, &at("hostPath"), errors),
        Some(("emptyDir", empty_dir)) => {
            let limit = empty_dir.get("sizeLimit").map(|l| match l {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            });
            if limit.is_some_and(|l| quantity::compare(&l, "0") == Some(Ordering::Less)) {
                let why = "SizeLimit field must be a valid resource quantity";
                errors.push(FieldError::forbidden(at("emptyDir.sizeLimit"), why));
            }
        }
        Some(("downwardAPI", downward)) => downward_api_items(downward, &at("downwardAPI"), errors),
        Some(("persistentVolumeClaim", claim))
            if claim.get("claimName").and_then(Value::as_str).unwrap_or("").is_empty() =>
        {
            errors.push(FieldError::required(at("persistentVolumeClaim.claimName")));
        }
        Some(("nfs", nfs)) => {
            let text = |field: &str| nfs.get(field).and_then(Value::as_str).unwrap_or("");
            if text("server").is_empty() {
                errors.push(FieldError::required(at("nfs.server")));
            }
            match text("path") {
                "" => errors.push(FieldError::required(at("nfs.path"))),
                path if !path.starts_with('/') => errors.push(FieldError::invalid(
                    at("nfs.path"),
                    path,
                    "must be an absolute path",
                )),
                _ => {}
            }
        }
        Some(("csi", csi)) => match csi.get("driver").and_then(Value::as_str).unwrap_or("") {
            "" => errors.push(FieldError::required(at("csi.driver"))),
            driver => {
                for problem in dns1123_subdomain_errors(&driver.to_lowercase()) {
                    errors.push(FieldError::invalid(at("csi.driver"), driver, problem));
                }
            }
        },
        Some(("ephemeral", ephemeral)) => {
            match ephemeral.get("volumeClaimTemplate").filter(|t| t.is_object()) {
                None => errors.push(FieldError::required(at("ephemeral.volumeClaimTemplate"))),
                Some(template) => {
                    // The claim it makes is checked as a claim, under the template's path.
                    let mut claim_errors = Vec::new();
                    storage::validate_claim(template.get("spec"), &mut claim_errors);
                    let prefix = at("ephemeral.volumeClaimTemplate.");
                    for mut error in claim_errors {
                        error.field.insert_str(0, &prefix);
                        errors.push(error);
                    }
                }
            }
        }
        Some(("projected", projected)) => {
            let mode = projected.get("defaultMode").and_then(Value::as_i64);
            if let Some(mode) = mode.filter(|m| !(0..=0o777).contains(m)) {
                errors.push(FieldError::invalid_number(
                    at("projected.defaultMode"),
                    mode,
                    FILE_MODE_MSG,
                ));
            }
            // The files' paths, one set across the sources (a token's aside), as Kubernetes'
            // `validateProjectionSources` keeps it.
            let mut paths: FastSet<String> = FastSet::default();
            let mut duplicate = |path: &str, value: &str, errors: &mut Vec<FieldError>| {
                if !path.is_empty() && !paths.insert(path.to_string()) {
                    let detail = "conflicting duplicate paths";
                    errors.push(FieldError::invalid(at("projected"), value, detail));
                }
            };
            let sources = projected.get("sources").and_then(Value::as_array);
            for (i, source) in sources.into_iter().flatten().enumerate() {
                let source_at = at(&format!("projected.sources[{i}]"));
                let mut kinds = 0;
                for kind in ["secret", "configMap"] {
                    let Some(keyed) = source.get(kind).filter(|k| !k.is_null()) else { continue };
                    kinds += 1;
                    let at = format!("{source_at}.{kind}");
                    let name = keyed.get("name").and_then(Value::as_str).unwrap_or("");
                    if name.is_empty() {
                        errors.push(FieldError::required(format!("{at}.name")));
                    }
                    validate_items(keyed, true, &at, errors);
                    let items = keyed.get("items").and_then(Value::as_array);
                    for item in items.into_iter().flatten() {
                        duplicate(
                            item.get("path").and_then(Value::as_str).unwrap_or(""),
                            name,
                            errors,
                        );
                    }
                }
                if let Some(downward) = source.get("downwardAPI").filter(|d| !d.is_null()) {
                    kinds += 1;
                    let at = format!("{source_at}.downwardAPI");
                    validate_items(downward, false, &at, errors);
                    downward_api_items(downward, &at, errors);
                    let items = downward.get("items").and_then(Value::as_array);
                    for item in items.into_iter().flatten() {
                        let path = item.get("path").and_then(Value::as_str).unwrap_or("");
                        duplicate(path, path, errors);
                    }
                }
                if let Some(token) = source.get("serviceAccountToken").filter(|t| t.is_object()) {
                    kinds += 1;
                    let field = || format!("{source_at}.serviceAccountToken.expirationSeconds");
                    let seconds =
                        token.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(0);
                    if seconds < 600 {
                        let message = "may not specify a duration less than 10 minutes";
                        errors.push(FieldError::invalid_number(field(), seconds, message));
                    } else if seconds > 1 << 32 {
                        let message = "may not specify a duration larger than 2^32 seconds";
                        errors.push(FieldError::invalid_number(field(), seconds, message));
                    }
                    // (Kubernetes names the projection's `path`, not the token's.)
                    match token.get("path").and_then(Value::as_str).unwrap_or("") {
                        "" => errors.push(FieldError::required(at("projected.path"))),
                        path => {
                            for problem in local_path_errors(path, true) {
                                errors.push(FieldError::invalid(
                                    at("projected.path"),
                                    path,
                                    problem,
                                ));
                            }
                        }
                    }
                }
                if source.get("clusterTrustBundle").is_some_and(|b| !b.is_null()) {
                    kinds += 1;
                }
                if kinds > 1 {
                    let detail = "may not specify more than 1 volume type per source";
                    errors.push(FieldError::forbidden(source_at, detail));
                }
            }
        }
        _ => {}
    }
}

/// The `fieldRef`s of a downward API volume's (or projection's) files.
fn downward_api_items(downward: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let items = downward.get("items").and_then(Value::as_array);
    for (i, item) in items.into_iter().flatten().enumerate() {
        if let Some(field_ref) = item.get("fieldRef").filter(|f| f.is_object()) {
            let at = || format!("{at}.items[{i}].fieldRef");
            validate_field_ref(field_ref, &VOLUME_FIELD_PATHS, &at, errors);
        }
    }
}

/// What Kubernetes checks of a container besides its name, image, ports' numbers and
/// resources: volume mounts name a volume of the pod, port names are service names and unique
/// in the container, the pull policy is known, probes and lifecycle hooks have one complete handler
/// (and a plain init container has neither).
fn validate_container_extras<'a>(
    c: &'a Value,
    list: &str,
    grace: Option<i64>,
    volumes: &FastSet<&str>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let mounts = c.get("volumeMounts").and_then(Value::as_array);
    let mut mount_paths: Vec<&str> = Vec::new();
    for (j, mount) in mounts.into_iter().flatten().enumerate() {
        let name = mount.get("name").and_then(Value::as_str).unwrap_or("");
        if !volumes.contains(&name) {
            errors.push(FieldError::not_found(at(&format!(".volumeMounts[{j}].name")), name));
        }
        match mount.get("mountPath").and_then(Value::as_str).unwrap_or("") {
            "" => errors.push(FieldError::required(at(&format!(".volumeMounts[{j}].mountPath")))),
            path if mount_paths.contains(&path) => errors.push(FieldError::invalid(
                at(&format!(".volumeMounts[{j}].mountPath")),
                path,
                "must be unique",
            )),
            path => mount_paths.push(path),
        }
        let text = |field: &str| mount.get(field).and_then(Value::as_str).unwrap_or("");
        // (Kubernetes names these two paths without the mount's index.)
        let sub = text("subPath");
        for problem in local_path_errors(sub, false).into_iter().filter(|_| !sub.is_empty()) {
            errors.push(FieldError::invalid(at(".volumeMounts.subPath"), sub, problem));
        }
        let expression = text("subPathExpr");
        if !expression.is_empty() {
            if !sub.is_empty() {
                let message = "subPathExpr and subPath are mutually exclusive";
                let field = at(&format!(".volumeMounts[{j}].subPathExpr"));
                errors.push(FieldError::invalid(field, expression, message));
            }
            for problem in local_path_errors(expression, false) {
                errors.push(FieldError::invalid(
                    at(".volumeMounts.subPathExpr"),
                    expression,
                    problem,
                ));
            }
        }
        validate_mount_propagation(
            c,
            mount,
            &|rest| at(&format!(".volumeMounts[{j}].{rest}")),
            errors,
        );
    }
    // Port names are unique within the container (two containers may both name one "http").
    let mut port_names = FastSet::default();
    let ports = c.get("ports").and_then(Value::as_array);
    for (j, port) in ports.into_iter().flatten().enumerate() {
        let Some(name) = port.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            continue;
        };
        let field = || at(&format!(".ports[{j}].name"));
        // (An invalid name is not also a duplicate, as in `validateContainerPorts`.)
        let problems = port_name_errors(name);
        if !problems.is_empty() {
            errors.extend(problems.into_iter().map(|p| FieldError::invalid(field(), name, p)));
        } else if !port_names.insert(name) {
            errors.push(FieldError::duplicate(field(), name));
        }
    }
    if let Some(policy) = c.get("imagePullPolicy").and_then(Value::as_str) {
        if !matches!(policy, "Always" | "IfNotPresent" | "Never") {
            errors.push(FieldError::not_supported(
                at(".imagePullPolicy"),
                policy,
                &["Always", "IfNotPresent", "Never"],
            ));
        }
    }
    if list == "ephemeralContainers" {
        // (Its probes and hooks are refused outright.)
        return;
    }
    // An init container that is not a sidecar runs to its end: nothing probes or hooks it.
    let plain_init = list == "initContainers"
        && c.get("restartPolicy").and_then(Value::as_str) != Some("Always");
    for probe in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(given) = c.get(probe).filter(|p| !p.is_null()) else { continue };
        if plain_init {
            let message = "may not be set for init containers without restartPolicy=Always";
            errors.push(FieldError::forbidden(at(&format!(".{probe}")), message));
            continue;
        }
        if probe != "lifecycle" {
            let probe_at = |rest: &str| at(&format!(".{probe}{rest}"));
            validate_probe(probe, given, &probe_at, errors);
            continue;
        }
        for hook in ["postStart", "preStop"] {
            let Some(handler) = given.get(hook).filter(|h| !h.is_null()) else { continue };
            let hook_at = |rest: &str| at(&format!(".lifecycle.{hook}{rest}"));
            let kinds = ["exec", "httpGet", "tcpSocket", "sleep"];
            validate_handler(handler, &kinds, grace, &hook_at, errors);
        }
    }
}

/// A mount's `mountPropagation` (a known mode; `Bidirectional` for privileged containers only)
/// and `recursiveReadOnly` (a known mode, for read-only mounts that propagate nothing back).
fn validate_mount_propagation(
    c: &Value,
    mount: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let propagation = mount.get("mountPropagation").and_then(Value::as_str);
    if let Some(mode) = propagation {
        const MODES: [&str; 3] = ["Bidirectional", "HostToContainer", "None"];
        if !MODES.contains(&mode) {
            errors.push(FieldError::not_supported(at("mountPropagation"), mode, &MODES));
        }
        let privileged = json::at(c, "/securityContext/privileged") == Some(&Value::Bool(true));
        if mode == "Bidirectional" && !privileged {
            let message =
                "Bidirectional mount propagation is available only to privileged containers";
            errors.push(FieldError::forbidden(at("mountPropagation"), message));
        }
    }
    let Some(recursive) = mount.get("recursiveReadOnly").and_then(Value::as_str) else { return };
    const RECURSIVE: [&str; 3] = ["Disabled", "Enabled", "IfPossible"];
    if !RECURSIVE.contains(&recursive) {
        errors.push(FieldError::not_supported(at("recursiveReadOnly"), recursive, &RECURSIVE));
        return;
    }
    if recursive != "Disabled" && mount.get("readOnly") != Some(&Value::Bool(true)) {
        let message = "may only be specified when readOnly is true";
        errors.push(FieldError::forbidden(at("recursiveReadOnly"), message));
    }
    if recursive != "Disabled" && propagation.is_some_and(|p| p != "None") {
        let message = "may only be specified when mountPropagation is None or not specified";
        errors.push(FieldError::forbidden(at("recursiveReadOnly"), message));
    }
}

/// A probe (`validateProbe` and its liveness, readiness and startup variants): one complete
/// handler, no negative counts or periods, a grace period of its own that is positive (and
/// none for readiness, which never kills); liveness and startup succeed on one success.
fn validate_probe(
    kind: &str,
    probe: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    validate_handler(probe, &["exec", "httpGet", "tcpSocket", "grpc"], None, at, errors);
    let number = |field: &str| probe.get(field).and_then(Value::as_i64);
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if let Some(value) = number(field).filter(|v| *v < 0) {
            let message = "must be greater than or equal to 0";
            errors.push(FieldError::invalid_number(at(&format!(".{field}")), value, message));
        }
    }
    let grace_at = || at(".terminationGracePeriodSeconds");
    let grace = number("terminationGracePeriodSeconds");
    if let Some(grace) = grace.filter(|g| *g <= 0) {
        errors.push(FieldError::invalid_number(grace_at(), grace, "must be greater than 0"));
    }
    match kind {
        "readinessProbe" => {
            if let Some(grace) = grace {
                let message = "must not be set for readinessProbes";
                errors.push(FieldError::invalid_number(grace_at(), grace, message));
            }
        }
        _ => {
            // (Defaulted to 1 when not given.)
            if let Some(times) = number("successThreshold").filter(|t| *t != 1) {
                let field = at(".successThreshold");
                errors.push(FieldError::invalid_number(field, times, "must be 1"));
            }
        }
    }
}

/// Problems with `name` as a port's name (an IANA service name), in apimachinery's words
/// (`IsValidPortName`): at most 15 characters of `[-a-z0-9]`, one a letter, no `--`, no `-`
/// at either end.
fn port_name_errors(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 15 {
        problems.push("must be no more than 15 characters".to_string());
    }
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        problems
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        problems.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        problems.push("must not contain consecutive hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push("must not begin or end with a hyphen".into());
    }
    problems
}

/// A port given by number or by name (a probe's or hook's, a service's target port).
fn port_number_or_name(
    port: Option<&Value>,
    field: impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    match port {
        Some(Value::String(name)) => {
            for problem in port_name_errors(name) {
                errors.push(FieldError::invalid(field(), name, problem));
            }
        }
        Some(Value::Number(n)) => match n.as_i64() {
            Some(p) => port_number(p, field, errors),
            None => errors.push(FieldError::invalid_number(field(), n, PORT_RANGE_MSG)),
        },
        _ => port_number(0, field, errors),
    }
}

/// apimachinery's words for a header name that is not one (`IsHTTPHeaderName`).
const HEADER_NAME_MSG: &str = "a valid HTTP header must consist of alphanumeric characters or \
'-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')";

/// A probe's or lifecycle hook's handler (`validateHandler`): exactly one of the `kinds`
/// given, each complete. A sleep is shorter than the pod's grace period.
fn validate_handler(
    handler: &Value,
    kinds: &[&str],
    grace: Option<i64>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let mut given = kinds.iter().filter(|k| handler.get(**k).is_some_and(|v| !v.is_null()));
    let Some(first) = given.next() else {
        errors.push(FieldError::required_because(at(""), "must specify a handler type"));
        return;
    };
    validate_action(handler, first, grace, at, errors);
    for extra in given {
        errors.push(FieldError::forbidden(
            at(&format!(".{extra}")),
            "may not specify more than 1 handler type",
        ));
    }
}

/// The handler's one action, `first`: complete, a sleep shorter than the pod's grace period.
fn validate_action(
    handler: &Value,
    first: &str,
    grace: Option<i64>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let action = &handler[first];
    let field = |rest: &str| at(&format!(".{first}{rest}"));
    match first {
        "exec" => {
            let empty = action.get("command").and_then(Value::as_array).is_none_or(Vec::is_empty);
            if empty {
                errors.push(FieldError::required(field(".command")));
            }
        }
        "httpGet" => {
            if action.get("path").and_then(Value::as_str).unwrap_or("").is_empty() {
                errors.push(FieldError::required(field(".path")));
            }
            port_number_or_name(action.get("port"), || field(".port"), errors);
            let scheme = action.get("scheme").and_then(Value::as_str).unwrap_or("");
            if !matches!(scheme, "HTTP" | "HTTPS") {
                errors.push(FieldError::not_supported(
                    field(".scheme"),
                    scheme,
                    &["HTTP", "HTTPS"],
                ));
            }
            let headers = action.get("httpHeaders").and_then(Value::as_array);
            for header in headers.into_iter().flatten() {
                let name = header.get("name").and_then(Value::as_str).unwrap_or("");
                let valid = !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                if !valid {
                    errors.push(FieldError::invalid(field(".httpHeaders"), name, HEADER_NAME_MSG));
                }
            }
        }
        "tcpSocket" => port_number_or_name(action.get("port"), || field(".port"), errors),
        "grpc" => {
            let port = action.get("port").and_then(Value::as_i64).unwrap_or(0);
            port_number(port, || field(".port"), errors);
        }
        "sleep" => {
            let seconds = action.get("seconds").and_then(Value::as_i64).unwrap_or(0);
            if let Some(grace) = grace.filter(|g| seconds <= 0 || seconds > *g) {
                let message = format!(
                    "must be greater than 0 and less than terminationGracePeriodSeconds \
                     ({grace}). Please enable PodLifecycleSleepActionAllowZero feature gate if \
                     you need a sleep of zero duration."
                );
                errors.push(FieldError::invalid_number(field(""), seconds, &message));
            }
        }
        _ => {}
    }
}

/// A ReplicationController's spec, in the order of Kubernetes' checks (so its causes come in
/// the same order): minReadySeconds, the selector, replicas, then the pod template.
/// A PodTemplate's `template`, as Kubernetes' `ValidatePodTemplateSpec`: its labels, its pod
/// spec (any restart policy), and no ephemeral containers.
fn validate_pod_template(object: &Value, errors: &mut Vec<FieldError>) {
    validate_pod_template_spec(object.get("template"), "template", errors);
}

/// A pod template (at `at`: a PodTemplate's `template`, an RC's `spec.template`), as
/// Kubernetes' `ValidatePodTemplateSpec`: its labels at `<at>.labels`, its annotations at
/// `<at>.annotations`, its pod spec, and no ephemeral containers.
fn validate_pod_template_spec(template: Option<&Value>, at: &str, errors: &mut Vec<FieldError>) {
    let meta = |field: &str| template.and_then(|t| t.pointer(&format!("/metadata/{field}")));
    validate_labels(meta("labels"), &format!("{at}.labels"), errors);
    validate_annotations(meta("annotations"), &format!("{at}.annotations"), errors);
    validate_pod_spec(template.and_then(|t| t.get("spec")), &format!("{at}.spec"), false, errors);
    if let Some(template) = template {
        forbid_ephemeral_containers(template, at, errors);
    }
}

/// A pod template (at `at`: a PodTemplate's, an RC's) may hold no ephemeral containers.
fn forbid_ephemeral_containers(template: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let ephemeral = json::at(template, "/spec/ephemeralContainers").and_then(Value::as_array);
    if ephemeral.is_some_and(|e| !e.is_empty()) {
        let field = format!("{at}.spec.ephemeralContainers");
        errors
            .push(FieldError::forbidden(field, "ephemeral containers not allowed in pod template"));
    }
}

fn validate_rc(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = object.get("spec");
    let min_ready = spec.and_then(|s| s.get("minReadySeconds")).and_then(Value::as_i64);
    if let Some(seconds) = min_ready.filter(|s| *s < 0) {
        errors.push(FieldError::invalid_number(
            "spec.minReadySeconds",
            seconds,
            "must be greater than or equal to 0",
        ));
    }
    // Only not empty: a selector no template's labels could match is refused below.
    let selector = spec.and_then(|s| s.get("selector")).and_then(Value::as_object);
    let selector = selector.filter(|sel| !sel.is_empty());
    if selector.is_none() {
        errors.push(FieldError::required("spec.selector"));
    }
    if let Some(replicas) = spec.and_then(|s| s.get("replicas")).and_then(Value::as_i64) {
        if replicas < 0 {
            errors.push(FieldError::invalid_number(
                "spec.replicas",
                replicas,
                "must be greater than or equal to 0",
            ));
        }
    }
    let Some(t) = spec.and_then(|s| s.get("template")) else {
        errors.push(FieldError::required("spec.template"));
        return;
    };
    let template_labels = t.pointer("/metadata/labels").and_then(Value::as_object);
    if let Some(sel) = selector {
        let matches =
            template_labels.is_some_and(|labels| sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
        if !matches {
            errors.push(FieldError::invalid_printed(
                "spec.template.metadata.labels",
                &go_string_map(template_labels),
                "`selector` does not match template `labels`",
            ));
        }
    }
    validate_pod_template_spec(Some(t), "spec.template", errors);
    // A controller's pods run for good, as Kubernetes' `ValidatePodTemplateSpecForRC`.
    let policy = json::at(t, "/spec/restartPolicy").and_then(Value::as_str);
    if let Some(policy) = policy.filter(|p| *p != "Always") {
        let field = "spec.template.spec.restartPolicy";
        errors.push(FieldError::not_supported(field, policy, &["Always"]));
    }
    if json::at(t, "/spec/activeDeadlineSeconds").is_some_and(|d| !d.is_null()) {
        errors.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicationController is not Supported",
        ));
    }
}

/// A service's `ipFamilies` and `ipFamilyPolicy`, as Kubernetes' validation checks them
/// whatever the cluster serves: known values, no family twice; neither set on an
/// `ExternalName` service.
fn validate_ip_families(spec: Option<&Value>, errors: &mut Vec<FieldError>) {
    let text = |field: &str| spec.and_then(|s| s.get(field)).and_then(Value::as_str);
    let families = spec.map(|s| json::strings(s, "ipFamilies")).unwrap_or_default();
    if text("type") == Some("ExternalName") {
        let forbidden = "may not be set for ExternalName services";
        if !families.is_empty() {
            errors.push(FieldError::forbidden("spec.ipFamilies", forbidden));
        }
        if text("ipFamilyPolicy").is_some() {
            errors.push(FieldError::forbidden("spec.ipFamilyPolicy", forbidden));
        }
        return;
    }
    let mut seen = FastSet::default();
    for (i, family) in families.iter().enumerate() {
        let field = format!("spec.ipFamilies[{i}]");
        if !matches!(family.as_str(), "IPv4" | "IPv6") {
            errors.push(FieldError::not_supported(&field, family, &["IPv4", "IPv6"]));
        }
        if !seen.insert(family) {
            errors.push(FieldError::duplicate(field, family));
        }
    }
    if let Some(policy) = text("ipFamilyPolicy") {
        const POLICIES: [&str; 3] = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if !POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported("spec.ipFamilyPolicy", policy, &POLICIES));
        }
    }
}

const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";

/// A port number is 1-65535.
fn port_number(port: i64, field: impl FnOnce() -> String, errors: &mut Vec<FieldError>) {
    if !(1..=65535).contains(&port) {
        errors.push(FieldError::invalid_number(field(), port, PORT_RANGE_MSG));
    }
}

/// A port's protocol is TCP, UDP or SCTP.
fn port_protocol(protocol: &str, field: impl FnOnce() -> String, errors: &mut Vec<FieldError>) {
    if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
        errors.push(FieldError::not_supported(field(), protocol, &["SCTP", "TCP", "UDP"]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resources::find;
    use crate::model::{pod_deletion_cost, POD_DELETION_COST};
    use serde_json::json;

    /// Deletion fields a write may not set: printed as Kubernetes prints them.
    #[test]
    fn deletion_fields_are_not_set_by_writes() {
        let current = json!({"metadata": {"name": "c"}});
        let body = json!({"metadata": {"name": "c", "deletionTimestamp": "2030-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 5}});
        let errors: Vec<String> = validate_deletion_fields(&current, &body)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(
            errors,
            [
                "metadata.deletionGracePeriodSeconds: Invalid value: 5: field is immutable",
                "metadata.deletionTimestamp: Invalid value: 2030-01-01 00:00:00 +0000 UTC: field is immutable",
            ]
        );
    }

    #[test]
    fn names() {
        assert!(dns1123_label_errors("my-name").is_empty());
        assert!(!dns1123_label_errors("My_Name").is_empty());
        assert!(!dns1123_label_errors("-a").is_empty());
        assert!(!dns1123_label_errors(&"a".repeat(64)).is_empty());
        assert!(dns1123_subdomain_errors("a.b-c.d").is_empty());
        assert!(!dns1123_subdomain_errors("a..b").is_empty());
        assert!(label_key_errors("kubernetes.io/hostname").is_empty());
        // Worded as Kubernetes' IsQualifiedName and IsValidLabelValue word them.
        let regex = "must consist of alphanumeric characters, '-', '_' or '.', and must start \
            and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
            regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        assert_eq!(
            label_key_errors("Bad_Prefix/-x"),
            [format!("prefix part {DNS1123_SUBDOMAIN_MSG}"), format!("name part {regex}"),]
        );
        assert_eq!(label_key_errors("/x"), ["prefix part must be non-empty"]);
        assert_eq!(
            label_key_errors(""),
            ["name part must be non-empty".to_string(), format!("name part {regex}"),]
        );
        assert_eq!(
            label_key_errors(&"x".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert_eq!(
            label_key_errors("a/b/c"),
            [format!(
                "a qualified name {regex} with an optional DNS subdomain prefix and '/' (e.g. \
             'example.com/MyName')"
            )]
        );
        assert_eq!(label_value_errors(&"x".repeat(64)), ["must be no more than 63 characters"]);
        assert!(label_value_errors("-x")[0].ends_with(
            "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        ));
        assert!(!label_key_errors("bad key").is_empty());
        assert!(label_value_errors("").is_empty());
        assert!(!label_value_errors("-x").is_empty());
    }

    #[test]
    fn core_events_are_named_like_path_segments_and_new_ones_like_subdomains() {
        let core = crate::model::resources::core("events");
        let new = crate::model::resources::find("events.k8s.io", "v1", "events").unwrap();
        let name = "system:controller:foo.18eea1e10dc0150e";
        assert!(name_errors(core, name).is_empty());
        assert!(name_errors(core, "Foo_Bar.1").is_empty());
        assert_eq!(name_errors(core, ".."), ["may not be '..'"]);
        assert!(!name_errors(new, name).is_empty());
    }

    #[test]
    fn a_pod_deletion_cost_is_a_plain_32_bit_integer() {
        let pods = find("", "v1", "pods").unwrap();
        let costing = |cost: &str| {
            json!({"metadata": {"name": "p", "annotations": {POD_DELETION_COST: cost}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}})
        };
        for fine in ["0", "-10", "2147483647", "100"] {
            assert!(validate_object(pods, &costing(fine)).is_empty(), "{fine}");
            assert_eq!(pod_deletion_cost(&costing(fine)).unwrap().to_string(), fine);
        }
        for refused in ["+10", "008", "2147483648", "abc", ""] {
            assert_eq!(
                messages(&validate_object(pods, &costing(refused))),
                [format!(
                    "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid \
                     value: \"{refused}\": must be a 32bit integer"
                )]
            );
        }
    }

    #[test]
    fn pod_rules() {
        let pods = find("", "v1", "pods").unwrap();
        let ok = json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}});
        assert!(validate_object(pods, &ok).is_empty());
        let bad = json!({"metadata":{"name":"P_1"},"spec":{"containers":[
            {"name":"c","image":"i","ports":[{"containerPort":70000}]},{"name":"c","image":""}]}});
        let fields: Vec<_> = validate_object(pods, &bad).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "spec.containers[0].ports[0].containerPort",
                "spec.containers[1].name",
                "spec.containers[1].image"
            ]
        );
        let zero = json!({"metadata":{"name":"p"},"spec":{"containers":[
            {"name":"c","image":"i","ports":[{"containerPort":0}]}]}});
        let required = &validate_object(pods, &zero)[0];
        assert_eq!(
            (required.field.as_str(), required.message.as_str()),
            ("spec.containers[0].ports[0].containerPort", "Required value")
        );
        let labels = json!({"metadata":{"name":"p","labels":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}});
        assert_eq!(validate_object(pods, &labels)[0].field, "metadata.labels");
        let empty = json!({"metadata":{"name":"p"},"spec":{"containers":[]}});
        assert_eq!(validate_object(pods, &empty)[0].field, "spec.containers");
    }

    #[test]
    fn finalizers_are_qualified_names_and_unprefixed_ones_standard() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "annotations": {"Example.com/Key": "v"},
            "finalizers": ["orphan", "foregroundDeletion", "custom", "example.com/keep"]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let errors = validate_object(pods, &pod);
        let found: Vec<_> = errors.iter().map(|e| (e.field.as_str(), e.message.as_str())).collect();
        assert_eq!(
            found,
            [
                (
                    "metadata.finalizers",
                    "Invalid value: []string{\"orphan\", \
                \"foregroundDeletion\", \"custom\", \"example.com/keep\"}: finalizer orphan and \
                foregroundDeletion cannot be both set"
                ),
                (
                    "metadata.finalizers[2]",
                    "Invalid value: \"custom\": name is neither a standard \
                finalizer name nor is it fully qualified"
                ),
            ]
        );
        let namespaces = find("", "v1", "namespaces").unwrap();
        let namespace = json!({"metadata": {"name": "n"},
            "spec": {"finalizers": ["kubernetes", "mine", "example.com/a b"]}});
        let errors = validate_object(namespaces, &namespace);
        let found: Vec<_> = errors.iter().map(|e| (e.field.as_str(), e.message.as_str())).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            found[0],
            (
                "spec.finalizers",
                "Invalid value: \"mine\": name is neither a \
            standard finalizer name nor is it fully qualified"
            )
        );
        assert_eq!(found[1].0, "spec.finalizers");
        assert!(found[1].1.starts_with("Invalid value: \"example.com/a b\": name part must"));
    }

    #[test]
    fn ip_families_take_known_values_once() {
        let services = find("", "v1", "services").unwrap();
        let causes = |spec: Value| -> Vec<String> {
            let service = json!({"metadata": {"name": "s"}, "spec": spec});
            let errors = validate_object(services, &service).into_iter();
            errors.map(|e| format!("{}: {}", e.field, e.message)).collect()
        };
        let errors = causes(json!({"ports": [{"port": 80}], "ipFamilyPolicy": "Dual",
            "ipFamilies": ["IPv4", "IPv4", "IPv5"]}));
        assert_eq!(errors, [
            "spec.ipFamilies[1]: Duplicate value: \"IPv4\"",
            "spec.ipFamilies[2]: Unsupported value: \"IPv5\": supported values: \"IPv4\", \"IPv6\"",
            "spec.ipFamilyPolicy: Unsupported value: \"Dual\": supported values: \
             \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"",
        ]);
        let errors = causes(json!({"type": "ExternalName", "externalName": "example.com",
            "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]}));
        assert_eq!(
            errors,
            [
                "spec.ipFamilies: Forbidden: may not be set for ExternalName services",
                "spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services",
            ]
        );
    }

    #[test]
    fn dns_config_and_host_aliases_are_checked_as_kubernetes_checks_them() {
        let pods = find("", "v1", "pods").unwrap();
        let with = |spec: Value| {
            let mut pod = json!({"metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}});
            for (k, v) in spec.as_object().unwrap() {
                pod["spec"][k] = v.clone();
            }
            let errors = validate_object(pods, &pod);
            errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        assert_eq!(
            with(json!({"dnsPolicy": "None"})),
            ["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",]
        );
        assert_eq!(with(json!({"dnsPolicy": "None", "dnsConfig": {"searches": ["a"]}})), [
            "spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver \
             when `dnsPolicy` is None",
        ]);
        let config = json!({"nameservers": ["1.1.1.1", "::1", "10.0.0.1", "dns"],
            "searches": ["svc.cluster.local.", "Bad_Domain"], "options": [{"name": "ndots"}, {}]});
        let errors = with(json!({"dnsPolicy": "None", "dnsConfig": config}));
        assert_eq!(errors.len(), 4, "{errors:#?}");
        assert_eq!(
            errors[0],
            "spec.dnsConfig.nameservers: Invalid value: []string{\"1.1.1.1\", \
            \"::1\", \"10.0.0.1\", \"dns\"}: must not have more than 3 nameservers"
        );
        assert_eq!(
            errors[1],
            "spec.dnsConfig.nameservers[3]: Invalid value: \"dns\": must be a \
            valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        );
        assert!(
            errors[2].starts_with(
                "spec.dnsConfig.searches[1]: Invalid value: \"Bad_Domain\": \
            a lowercase RFC 1123 subdomain"
            ),
            "{}",
            errors[2]
        );
        assert_eq!(errors[3], "spec.dnsConfig.options[1]: Required value: must not be empty");
        let long: Vec<String> = (0..33).map(|i| format!("s{i}")).collect();
        let errors = with(json!({"dnsConfig": {"searches": long}}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].ends_with("must not have more than 32 search paths"), "{errors:?}");
        let errors = with(json!({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a.b", "A"]},
            {"ip": "x", "hostnames": ["c"]}]}));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("spec.hostAliases[0].hostnames[1]: Invalid value: \"A\""));
        assert!(errors[1].starts_with("spec.hostAliases[1].ip: Invalid value: \"x\": must be a"));
        assert!(with(json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}}))
            .is_empty());
        let sloppy = json!({"nameservers": ["010.001.1.1"]});
        assert!(with(json!({"dnsPolicy": "None", "dnsConfig": sloppy})).is_empty());
        let errors =
            with(json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.256"]}}));
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn no_escalation_contradicts_privileges() {
        let pods = find("", "v1", "pods").unwrap();
        let context = json!({"allowPrivilegeEscalation": false, "privileged": true,
            "capabilities": {"add": ["NET_ADMIN", "CAP_SYS_ADMIN"]}});
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "i", "securityContext": context}]}});
        let messages: Vec<String> =
            validate_object(pods, &pod).into_iter().map(|e| e.message).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("`allowPrivilegeEscalation` to false and `privileged`"));
        assert!(messages[1].contains("`capabilities.Add` CAP_SYS_ADMIN"), "{messages:?}");
        let allowed = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "image": "i", "securityContext": {"allowPrivilegeEscalation": true, "privileged": true}}]}});
        assert!(validate_object(pods, &allowed).is_empty());
    }

    #[test]
    fn pod_fields_kubernetes_checks_beyond_containers() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "finalizers": ["example.com/keep", "a b", ""]},
            "spec": {"dnsPolicy": "Bogus", "hostname": "Bad_Host",
                "securityContext": {"runAsUser": -1},
                "tolerations": [{"key": "k", "operator": "Bogus", "effect": "Sometimes"},
                    {"key": "k", "operator": "Exists", "tolerationSeconds": 5}, {},
                    {"key": "a b", "operator": "Exists"}, {"operator": "Exists"}],
                "containers": [{"name": "c", "image": "i",
                    "env": [{"name": ""}, {"name": "A=B"}, {"name": "ok.name-1"}],
                    "securityContext": {"runAsUser": 2147483648_i64, "runAsGroup": -1}}],
                "initContainers": [{"name": "c", "image": "i"}, {"name": "setup", "image": ""}]}});
        let fields: Vec<_> = validate_object(pods, &pod).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "metadata.finalizers",
                "metadata.finalizers",
                "metadata.finalizers",
                "metadata.finalizers[1]",
                "metadata.finalizers[2]",
                "spec.containers[0].env[0].name",
                "spec.containers[0].env[1].name",
                "spec.containers[0].securityContext.runAsUser",
                "spec.containers[0].securityContext.runAsGroup",
                "spec.initContainers[0].name",
                "spec.initContainers[1].image",
                "spec.dnsPolicy",
                "spec.hostname",
                "spec.securityContext.runAsUser",
                "spec.tolerations[0].operator",
                "spec.tolerations[0].effect",
                "spec.tolerations[1].effect",
                "spec.tolerations[2].operator",
                "spec.tolerations[3].key",
            ]
        );
        let nodes = find("", "v1", "nodes").unwrap();
        let node = json!({"metadata": {"name": "n"}, "spec": {"taints": [
            {"key": "ok", "effect": "NoSchedule"}, {"key": "a b", "effect": "Bogus"}, {"key": "k"}]}});
        let fields: Vec<_> = validate_object(nodes, &node).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            ["metadata.taints[1].key", "metadata.taints[1].effect", "metadata.taints[2].effect"]
        );
    }

    #[test]
    fn a_namespaces_phase_follows_its_deletion() {
        let namespaces = find("", "v1", "namespaces").unwrap();
        let with = |phase: &str, deleting: bool| {
            let mut ns = json!({"metadata": {"name": "n"}, "status": {"phase": phase}});
            if deleting {
                ns["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            validate_status_update(namespaces, &Value::Null, &ns)
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
        };
        assert!(with("Active", false).is_empty() && with("", false).is_empty());
        assert!(with("Terminating", true).is_empty());
        assert_eq!(with("Terminating", false), ["status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"]);
        assert_eq!(with("Bogus", false), ["status.Phase: Invalid value: \"Bogus\": may only be 'Active' if `deletionTimestamp` is empty"]);
        assert_eq!(with("Active", true), ["status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"]);
    }

    #[test]
    fn a_pods_qos_class_is_immutable() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = |class: &str| json!({"status": {"qosClass": class}});
        assert!(validate_status_update(pods, &pod("BestEffort"), &pod("BestEffort")).is_empty());
        let changed = validate_status_update(pods, &pod("BestEffort"), &pod("Guaranteed"));
        assert_eq!(
            changed.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>(),
            ["status.qosClass: Invalid value: \"Guaranteed\": field is immutable"]
        );
    }

    #[test]
    fn rc_selector_must_match_template() {
        let rcs = find("", "v1", "replicationcontrollers").unwrap();
        let rc = json!({"metadata":{"name":"r"},"spec":{"selector":{"app":"a"},
            "template":{"metadata":{"labels":{"app":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}});
        let errors = validate_object(rcs, &rc);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.template.metadata.labels");
        // A template's labels and annotations are checked where Kubernetes names them; the
        // selector only for being there.
        let rc = json!({"metadata":{"name":"r","labels":{"ok":"1"}},"spec":{"selector":{"a_":"x"},
            "template":{"metadata":{"labels":{"a_":"x"},"annotations":{"b_":"y"}},
            "spec":{"containers":[{"name":"c","image":"i"}]}}}});
        let fields: Vec<String> = validate_object(rcs, &rc).into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["spec.template.labels", "spec.template.annotations"]);
        let templates = find("", "v1", "podtemplates").unwrap();
        let template = json!({"metadata":{"name":"t"},"template":{"metadata":{"labels":{"a_":"x"},
            "annotations":{"b_":"y"}},"spec":{"containers":[{"name":"c","image":"i"}]}}});
        let fields: Vec<String> =
            validate_object(templates, &template).into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["template.labels", "template.annotations"]);
    }
}

/// What an update of the main resource may not change, as Kubernetes refuses it (422): a pod's
/// spec beyond the fields `validate_pod_update` allows; the data of a ConfigMap or Secret
/// marked `immutable`, and the mark itself; a Secret's type.
pub fn validate_update(resource: &ResourceType, old: &Value, new: &Value) -> Vec<FieldError> {
    match resource.kind {
        "Pod" => validate_pod_update(old, new),
        "PersistentVolumeClaim" => storage::validate_claim_update(old, new),
        "PersistentVolume" => storage::validate_volume_update(old, new),
        "Node" => validate_node_update(old, new),
        "PriorityClass" => priority_class::validate_update(old, new),
        "ConfigMap" => immutable_content(old, new, &["data", "binaryData"]),
        "Service" => service::validate_update(old, new),
        "ResourceQuota" => resource_policy::validate_quota_update(old, new),
        "RoleBinding" | "ClusterRoleBinding" if old.get("roleRef") != new.get("roleRef") => {
            // The new reference, as Go prints Kubernetes' internal type.
            let part = |field: &str| {
                let value = json::at(new, &format!("/roleRef/{field}")).and_then(Value::as_str);
                go_quote(value.unwrap_or(""))
            };
            let printed = format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                part("apiGroup"),
                part("kind"),
                part("name")
            );
            vec![FieldError::invalid_printed("roleRef", &printed, "cannot change roleRef")]
        }
        "EndpointSlice" if old.get("addressType") != new.get("addressType") => {
            let detail = "field is immutable";
            let value = new.get("addressType").and_then(Value::as_str).unwrap_or("");
            vec![FieldError::invalid("addressType", value, detail)]
        }
        "Secret" => {
            let mut errors = Vec::new();
            let old_type = old.get("type").and_then(Value::as_str).unwrap_or("");
            let new_type = new.get("type").and_then(Value::as_str).unwrap_or("");
            if old_type != new_type {
                errors.push(FieldError::invalid("type", new_type, "field is immutable"));
            }
            errors.extend(immutable_content(old, new, &["data"]));
            errors
        }
        _ => Vec::new(),
    }
}

/// What a write of the status subresource may not set, as Kubernetes refuses it (422): a
/// namespace's phase is `Active` until it is being deleted, then `Terminating`; a pod's QoS
/// class is the one it was created with.
pub fn validate_status_update(
    resource: &ResourceType,
    old: &Value,
    new: &Value,
) -> Vec<FieldError> {
    if resource.kind == "Service" && resource.group.is_empty() {
        return service::validate_status(new);
    }
    if resource.kind == "Pod" && resource.group.is_empty() {
        let class = |pod| json::at(pod, "/status/qosClass").and_then(Value::as_str).unwrap_or("");
        if class(new) != class(old) {
            return vec![FieldError::invalid("status.qosClass", class(new), "field is immutable")];
        }
        return Vec::new();
    }
    if resource.kind != "Namespace" || !resource.group.is_empty() {
        return Vec::new();
    }
    // An empty phase is defaulted to Active, as Kubernetes decodes one.
    let phase = json::at(new, "/status/phase").and_then(Value::as_str).filter(|p| !p.is_empty());
    let phase = phase.unwrap_or("Active");
    let deleting = json::at(new, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    match (deleting, phase) {
        (false, "Active") | (true, "Terminating") => Vec::new(),
        (false, _) => vec![FieldError::invalid(
            "status.Phase",
            phase,
            "may only be 'Active' if `deletionTimestamp` is empty",
        )],
        (true, _) => vec![FieldError::invalid(
            "status.Phase",
            phase,
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        )],
    }
}

/// What no write of an object may change in its metadata, whichever part it writes: an object
/// being deleted takes no new finalizers (it would never go).
pub fn validate_metadata_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let generation =
        |object: &Value| json::at(object, "/metadata/generation").and_then(Value::as_i64);
    let (before, after) = (generation(old).unwrap_or(0), generation(new).unwrap_or(0));
    if after < before {
        let field = "metadata.generation";
        return vec![FieldError::invalid_number(field, after, "must not be decremented")];
    }
    if json::at(old, "/metadata/deletionTimestamp").is_none_or(Value::is_null) {
        return Vec::new();
    }
    let finalizers = |object: &Value| -> Vec<String> {
        let listed = json::at(object, "/metadata/finalizers").and_then(Value::as_array);
        listed.into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
    };
    let old_finalizers = finalizers(old);
    let mut added: Vec<String> =
        finalizers(new).into_iter().filter(|f| !old_finalizers.contains(f)).collect();
    if added.is_empty() {
        return Vec::new();
    }
    added.sort();
    added.dedup();
    let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    let detail = format!(
        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
        quoted.join(", ")
    );
    vec![FieldError::forbidden("metadata.finalizers", detail)]
}

/// An update's changes to the deletion fields of `current`'s metadata that Kubernetes refuses
/// (`field is immutable`): a deletion time on an object not being deleted, and a grace period
/// other than the stored one. (Leaving them out keeps the stored ones; a changed deletion time
/// of an object being deleted is put back.)
pub fn validate_deletion_fields(current: &Value, body: &Value) -> Vec<FieldError> {
    const IMMUTABLE: &str = "field is immutable";
    let field = |object: &Value, name: &str| {
        object.get("metadata").and_then(|m| m.get(name)).filter(|v| !v.is_null()).cloned()
    };
    let mut errors = Vec::new();
    let grace = field(body, "deletionGracePeriodSeconds");
    if let Some(grace) =
        grace.filter(|g| Some(g) != field(current, "deletionGracePeriodSeconds").as_ref())
    {
        let path = "metadata.deletionGracePeriodSeconds";
        errors.push(match grace.as_i64() {
            Some(seconds) => FieldError::invalid_number(path, seconds, IMMUTABLE),
            None => FieldError::invalid(path, &grace.to_string(), IMMUTABLE),
        });
    }
    let deleting = field(current, "deletionTimestamp").is_some();
    if let (false, Some(time)) = (deleting, field(body, "deletionTimestamp")) {
        // Printed as Go prints a `time.Time` (the API server's zone: UTC).
        let parsed = time.as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let printed = match parsed {
            Some(at) => {
                at.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
            }
            None => time.as_str().map_or_else(|| time.to_string(), str::to_string),
        };
        errors.push(FieldError::invalid_printed("metadata.deletionTimestamp", &printed, IMMUTABLE));
    }
    errors
}

/// A node's pod networks and provider id, once set, stay.
fn validate_node_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let cidrs = |node: &Value| json::at(node, "/spec/podCIDRs").cloned();
    let old_cidrs = cidrs(old);
    if old_cidrs.as_ref().and_then(Value::as_array).is_some_and(|c| !c.is_empty())
        && old_cidrs != cidrs(new)
    {
        let message = "node updates may not change podCIDR except from \"\" to valid";
        errors.push(FieldError::forbidden("spec.podCIDRs", message));
    }
    let [old_id, new_id] =
        [old, new].map(|node| json::at(node, "/spec/providerID").and_then(Value::as_str));
    if old_id.is_some_and(|id| !id.is_empty()) && old_id != new_id {
        let message = "node updates may not change providerID except from \"\" to valid";
        errors.push(FieldError::forbidden("spec.providerID", message));
    }
    errors
}

/// Once `immutable` is true, neither it nor `fields` may change.
fn immutable_content(old: &Value, new: &Value, fields: &[&str]) -> Vec<FieldError> {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return Vec::new();
    }
    let forbidden =
        |field: &str| FieldError::forbidden(field, "field is immutable when `immutable` is set");
    // Absent and empty are the same content, as in Kubernetes' comparison.
    let content = |object: &Value, field: &str| {
        object.get(field).filter(|v| v.as_object().is_some_and(|m| !m.is_empty())).cloned()
    };
    let mut errors = Vec::new();
    if new.get("immutable") != old.get("immutable") {
        errors.push(forbidden("immutable"));
    }
    for field in fields {
        if content(old, field) != content(new, field) {
            errors.push(forbidden(field));
        }
    }
    errors
}

/// A pod's scheduling gates: qualified names, each once.
fn validate_scheduling_gates(spec: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    let gates = spec.and_then(|s| s.get("schedulingGates")).and_then(Value::as_array);
    let Some(gates) = gates.filter(|g| !g.is_empty()) else { return };
    let mut seen = Vec::new();
    for (i, gate) in gates.iter().enumerate() {
        let name = gate.get("name").and_then(Value::as_str).unwrap_or("");
        let field = || format!("{path}.schedulingGates[{i}]");
        for problem in label_key_errors(name) {
            errors.push(FieldError::invalid(field(), name, problem));
        }
        if seen.contains(&name) {
            errors.push(FieldError::duplicate(field(), name));
        }
        seen.push(name);
    }
}

/// What only a new pod is held to (Kubernetes' `ValidatePodCreate`): no ephemeral containers
/// (they come through their subresource), and no node named while scheduling gates are left.
pub fn validate_pod_create(pod: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ephemeral = json::at(pod, "/spec/ephemeralContainers").and_then(Value::as_array);
    if ephemeral.is_some_and(|e| !e.is_empty()) {
        errors.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
    let gates = json::at(pod, "/spec/schedulingGates").and_then(Value::as_array);
    let bound = json::at(pod, "/spec/nodeName").and_then(Value::as_str);
    if bound.is_some_and(|n| !n.is_empty()) && gates.is_some_and(|g| !g.is_empty()) {
        let message = "cannot be set until all schedulingGates have been cleared";
        errors.push(FieldError::forbidden("spec.nodeName", message));
    }
    errors
}

/// A gated pod's gates may only be removed, one by one or all at once.
fn validate_gates_only_removed(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    let names = |spec: &Value| -> Vec<String> {
        let gates = spec.get("schedulingGates").and_then(Value::as_array);
        let name = |gate: &Value| gate.get("name").and_then(Value::as_str).map(String::from);
        gates.into_iter().flatten().filter_map(name).collect()
    };
    let before = names(old_spec);
    let mut errors = Vec::new();
    for (i, name) in names(new_spec).iter().enumerate() {
        if !before.contains(name) {
            errors.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
    errors
}

/// A gated pod's node selector may gain labels, and its required node affinity's terms gain
/// requirements (an affinity with no terms may take any); nothing of either may change or go.
/// Its preferred node affinity may change freely.
fn validate_gated_placement(old_spec: &Value, new_spec: &Value, errors: &mut Vec<FieldError>) {
    let selector = |spec: &Value| spec.get("nodeSelector").and_then(Value::as_object).cloned();
    let (before, after) = (selector(old_spec).unwrap_or_default(), selector(new_spec));
    let kept = before.iter().all(|(k, v)| after.as_ref().and_then(|a| a.get(k)) == Some(v));
    if !kept {
        // (As Go prints a map.)
        let shown = match &after {
            None => "map[string]string(nil)".to_string(),
            Some(after) => {
                let pairs: Vec<String> = (after.iter())
                    .map(|(k, v)| format!("{:?}:{:?}", k, v.as_str().unwrap_or_default()))
                    .collect();
                format!("map[string]string{{{}}}", pairs.join(", "))
            }
        };
        errors.push(FieldError::invalid_printed(
            "spec.nodeSelector",
            &shown,
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        ));
    }
    const TERMS: &str = "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/\
                         nodeSelectorTerms";
    let terms = |spec: &Value| json::at(spec, TERMS).and_then(Value::as_array).cloned();
    let old_terms = terms(old_spec).unwrap_or_default();
    if old_terms.is_empty() {
        return;
    }
    let new_terms = terms(new_spec).unwrap_or_default();
    let at = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.\
              nodeSelectorTerms";
    if old_terms.len() != new_terms.len() {
        errors.push(FieldError::invalid_printed(
            at,
            &Value::Array(new_terms).to_string(),
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        ));
        return;
    }
    // Each term keeps its requirements, in their order, and may have more after them.
    let extends = |old: &Value, new: &Value, list: &str| {
        let items = |term: &Value| term.get(list).and_then(Value::as_array).cloned();
        let (old, new) = (items(old).unwrap_or_default(), items(new).unwrap_or_default());
        old.len() <= new.len() && old.iter().zip(&new).all(|(a, b)| a == b)
    };
    for (i, (old, new)) in old_terms.iter().zip(&new_terms).enumerate() {
        if !(extends(old, new, "matchExpressions") && extends(old, new, "matchFields")) {
            errors.push(FieldError::invalid_printed(
                format!("{at}[{i}]"),
                &new.to_string(),
                "only additions are allowed (no mutations or deletions)",
            ));
        }
    }
}

/// What an update may change in a pod's spec, as Kubernetes allows it: container images,
/// `activeDeadlineSeconds`, additions to `tolerations`. Everything else is immutable.
fn validate_pod_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (Some(old_spec), Some(new_spec)) = (old.get("spec"), new.get("spec")) else {
        return Vec::new();
    };
    // A deadline may only come closer: lowered, never raised or removed.
    let deadline = |spec: &Value| spec.get("activeDeadlineSeconds").and_then(Value::as_i64);
    const FIELD: &str = "spec.activeDeadlineSeconds";
    match (deadline(old_spec), deadline(new_spec)) {
        (Some(before), Some(after)) if after > before => {
            let message = "must be less than or equal to previous value";
            return vec![FieldError::invalid_number(FIELD, after, message)];
        }
        _ => {}
    }
    let mut errors = Vec::new();
    if deadline(old_spec).is_some() && deadline(new_spec).is_none() {
        let message = "must not update from a positive integer to nil value";
        errors.push(FieldError::invalid(FIELD, "null", message));
    }
    // The list of containers is fixed: one added or removed says so, and nothing more.
    for list in ["containers", "initContainers"] {
        let count = |spec: &Value| spec.get(list).and_then(Value::as_array).map_or(0, Vec::len);
        if count(old_spec) != count(new_spec) {
            let message = "pod updates may not add or remove containers";
            errors.push(FieldError::forbidden(format!("spec.{list}"), message));
            return errors;
        }
    }
    errors.extend(validate_gates_only_removed(old_spec, new_spec));
    // While a pod is gated, where it may go can narrow (how a queue picks its nodes).
    let gated =
        old_spec.get("schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
    if gated {
        validate_gated_placement(old_spec, new_spec, &mut errors);
    }
    // A negative grace period (once let through) may be mended to 1.
    let grace = |spec: &Value| spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    let negative_grace_to_one =
        grace(old_spec).is_some_and(|g| g < 0) && grace(new_spec) == Some(1);
    let mutable_removed = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(map) = spec.as_object_mut() {
            map.remove("activeDeadlineSeconds");
            map.remove("tolerations");
            if negative_grace_to_one {
                map.remove("terminationGracePeriodSeconds");
            }
            map.remove("schedulingGates");
            if gated {
                map.remove("nodeSelector");
                if let Some(affinity) = map.get_mut("affinity").and_then(Value::as_object_mut) {
                    affinity.remove("nodeAffinity");
                }
                if map.get("affinity").and_then(Value::as_object).is_some_and(|a| a.is_empty()) {
                    map.remove("affinity");
                }
            }
            for list in ["containers", "initContainers"] {
                for c in map.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                    c.as_object_mut().map(|c| c.remove("image"));
                }
            }
        }
        spec
    };
    // Each toleration stays, but for its `tolerationSeconds`; more may be added.
    let tolerations = |spec: &Value| {
        let listed = spec.get("tolerations").and_then(Value::as_array).cloned();
        let mut listed = listed.unwrap_or_default();
        for toleration in listed.iter_mut().filter_map(Value::as_object_mut) {
            toleration.remove("tolerationSeconds");
        }
        listed
    };
    let new_tolerations = tolerations(new_spec);
    if !tolerations(old_spec).iter().all(|old| new_tolerations.contains(old)) {
        let message = "existing toleration can not be modified except its tolerationSeconds";
        errors.push(FieldError::forbidden("spec.tolerations", message));
    }
    let (old_fixed, new_fixed) = (mutable_removed(old_spec), mutable_removed(new_spec));
    if old_fixed == new_fixed {
        return errors;
    }
    errors.push(FieldError {
        reason: "FieldValueForbidden",
        field: "spec".into(),
        message: format!(
            "Forbidden: pod updates may not change fields other than \
             `spec.containers[*].image`,`spec.initContainers[*].image`,\
             `spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
             tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it \
             was previously negative)\n{}",
            spec_changes(&old_fixed, &new_fixed)
        ),
    });
    errors
}

/// What changed between two specs, a line per field (`- path: old`, `+ path: new`), as the
/// refusal of a pod update shows it (Kubernetes shows a diff of the two specs).
fn spec_changes(old: &Value, new: &Value) -> String {
    use json_patch::PatchOperation;
    let mut lines = Vec::new();
    for operation in json_patch::diff(old, new).iter() {
        let (path, before, after) = match operation {
            PatchOperation::Add(add) => (&add.path, None, Some(&add.value)),
            PatchOperation::Remove(remove) => {
                (&remove.path, old.pointer(remove.path.as_str()), None)
            }
            PatchOperation::Replace(replace) => {
                (&replace.path, old.pointer(replace.path.as_str()), Some(&replace.value))
            }
            _ => continue,
        };
        let mut field = String::from("spec");
        for token in path.tokens() {
            let step = token.decoded();
            if !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()) {
                field.push_str(&format!("[{step}]"));
            } else {
                field.push_str(&format!(".{step}"));
            }
        }
        lines.extend(before.map(|value| format!("  - {field}: {value}")));
        lines.extend(after.map(|value| format!("  + {field}: {value}")));
    }
    lines.join("\n")
}

#[cfg(test)]
mod pod_update_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scheduling_gates_are_only_removed_and_a_gated_pod_s_node_selector_only_grows() {
        let pod = |gates: &[&str], selector: Value| {
            let gates: Vec<Value> = gates.iter().map(|g| json!({"name": g})).collect();
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}],
                "schedulingGates": gates, "nodeSelector": selector}})
        };
        let messages = |old: Value, new: Value| -> Vec<String> {
            let errors = validate_pod_update(&old, &new);
            errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
        };
        let none = json!({});
        assert!(messages(pod(&["a", "b"], none.clone()), pod(&["b"], none.clone())).is_empty());
        assert!(messages(pod(&["a"], none.clone()), pod(&[], none.clone())).is_empty());
        assert_eq!(
            messages(pod(&["a"], none.clone()), pod(&["a", "x"], none.clone())),
            ["spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new \
              scheduling gate 'x'"]
        );
        let disk = json!({"disk": "ssd"});
        let more = json!({"disk": "ssd", "zone": "a"});
        assert!(messages(pod(&["a"], disk.clone()), pod(&["a"], more.clone())).is_empty());
        let changed = messages(pod(&["a"], disk.clone()), pod(&["a"], json!({"disk": "hdd"})));
        assert_eq!(
            changed,
            ["spec.nodeSelector: Invalid value: map[string]string{\"disk\":\"hdd\"}: only \
              additions to spec.nodeSelector are allowed (no mutations or deletions)"]
        );
        // Not gated (any more): the node selector is fixed.
        assert_eq!(messages(pod(&[], disk), pod(&[], more)).len(), 1);

        // Required node affinity: each term may gain requirements, the terms stay.
        let with_terms = |terms: Value| {
            let mut gated = pod(&["a"], json!({}));
            gated["spec"]["affinity"] = json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
                "preferredDuringSchedulingIgnoredDuringExecution": []}});
            gated
        };
        let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        let disk = json!({"key": "disk", "operator": "Exists"});
        let one = with_terms(json!([{"matchExpressions": [zone]}]));
        let narrower = with_terms(json!([{"matchExpressions": [zone, disk]}]));
        assert!(messages(one.clone(), narrower.clone()).is_empty());
        let mut any = pod(&["a"], json!({}));
        any["spec"]["affinity"] = json!({"podAffinity": {}});
        assert_eq!(messages(any, narrower.clone()).len(), 1, "pod affinity may not change");
        assert!(messages(pod(&["a"], json!({})), one.clone()).is_empty(), "none before");
        let at = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.\
                  nodeSelectorTerms";
        let replaced = messages(narrower.clone(), one.clone());
        assert_eq!(replaced.len(), 1);
        assert!(
            replaced[0].starts_with(&format!("{at}[0]: Invalid value: "))
                && replaced[0]
                    .ends_with(": only additions are allowed (no mutations or deletions)"),
            "{replaced:?}"
        );
        let two = with_terms(json!([{"matchExpressions": [zone]}, {"matchExpressions": [disk]}]));
        let added = messages(one, two);
        assert!(
            added[0].ends_with(
                "no additions/deletions to non-empty NodeSelectorTerms list are allowed"
            ),
            "{added:?}"
        );
    }

    #[test]
    fn a_pods_deadline_may_only_come_closer() {
        let pod = |deadline: Value| {
            let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
            if !deadline.is_null() {
                spec["activeDeadlineSeconds"] = deadline;
            }
            json!({"metadata": {"name": "p"}, "spec": spec})
        };
        let messages = |old: Value, new: Value| -> Vec<String> {
            let errors = validate_pod_update(&pod(old), &pod(new));
            errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
        };
        assert!(messages(json!(null), json!(5000)).is_empty());
        assert!(messages(json!(5000), json!(100)).is_empty());
        assert_eq!(
            messages(json!(5000), json!(6000)),
            ["spec.activeDeadlineSeconds: Invalid value: 6000: must be less than or equal to previous value"]
        );
        assert_eq!(
            messages(json!(5000), json!(null)),
            ["spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value"]
        );
    }

    #[test]
    fn ephemeral_containers_are_only_added_and_have_no_ports_probes_or_resources() {
        let pods = crate::model::resources::find("", "v1", "pods").unwrap();
        let pod = |ephemeral: Value| {
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "i"}],
                "ephemeralContainers": ephemeral}})
        };
        let fields = |errors: Vec<FieldError>| -> Vec<String> {
            errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
        };
        let debugger = json!({"name": "dbg", "image": "busybox", "targetContainerName": "app"});
        assert!(validate_object(pods, &pod(json!([debugger]))).is_empty());
        let bad = json!([{"name": "app", "image": "busybox", "targetContainerName": "gone",
            "readinessProbe": {"exec": {"command": ["true"]}}, "resources": {}}]);
        assert_eq!(
            fields(validate_object(pods, &pod(bad))),
            [
                "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[0].targetContainerName: Not found: \"gone\"",
                "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
        // What is not on the allow list must be empty: an empty list or map is not; and
        // sub-paths are refused.
        let more = json!([{"name": "dbg", "image": "busybox", "ports": [],
            "resources": {"limits": {}}, "resizePolicy": [{"resourceName": "cpu",
                "restartPolicy": "NotRequired"}],
            "volumeMounts": [{"name": "v", "mountPath": "/y", "subPath": "a"},
                {"name": "v", "mountPath": "/z", "subPathExpr": "$(A)"}]}]);
        let mut with_volume = pod(more);
        with_volume["spec"]["volumes"] = json!([{"name": "v", "emptyDir": {}}]);
        let forbidden: Vec<String> = fields(validate_object(pods, &with_volume))
            .into_iter()
            .filter(|e| e.ends_with("Forbidden: cannot be set for an Ephemeral Container"))
            .map(|e| e.split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            forbidden,
            [
                "spec.ephemeralContainers[0].ports",
                "spec.ephemeralContainers[0].resources",
                "spec.ephemeralContainers[0].resizePolicy",
                "spec.ephemeralContainers[0].volumeMounts[0].subPath",
                "spec.ephemeralContainers[0].volumeMounts[1].subPathExpr",
            ]
        );
        let before = pod(json!([debugger]));
        let added = pod(json!([debugger, {"name": "more", "image": "x"}]));
        assert!(validate_ephemeral_update(&before, &added).is_empty());
        let changed = pod(json!([{"name": "dbg", "image": "other"}]));
        assert_eq!(
            fields(validate_ephemeral_update(&before, &changed)),
            ["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed"]
        );
        assert_eq!(validate_ephemeral_update(&before, &pod(json!([]))).len(), 1);
    }

    #[test]
    fn pod_service_secret_and_claim_rules() {
        let find = |plural| crate::model::resources::find("", "v1", plural).unwrap();
        let fields = |plural, mut object: Value| -> Vec<String> {
            object["metadata"] = json!({"name": "x"});
            validate_object(find(plural), &object).into_iter().map(|e| e.field).collect()
        };
        let pod = |container: Value, extra: Value| {
            let mut spec = json!({"containers": [container]});
            for (k, v) in extra.as_object().unwrap() {
                spec[k] = v.clone();
            }
            json!({"spec": spec})
        };
        let ok = json!({"name": "c", "image": "i", "imagePullPolicy": "IfNotPresent",
            "ports": [{"name": "http", "containerPort": 80}, {"containerPort": 81}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "livenessProbe": {"tcpSocket": {"port": 80}}});
        let volumes = json!({"volumes": [{"name": "data", "emptyDir": {}}]});
        assert!(fields("pods", pod(ok.clone(), volumes.clone())).is_empty());
        assert_eq!(
            fields("pods", pod(ok.clone(), json!({}))),
            ["spec.containers[0].volumeMounts[0].name"]
        );
        let mut bad = ok.clone();
        bad["ports"][1]["name"] = json!("http");
        bad["imagePullPolicy"] = json!("Sometimes");
        bad["livenessProbe"] = json!({"periodSeconds": 1});
        assert_eq!(
            fields("pods", pod(bad, volumes)),
            [
                "spec.containers[0].ports[1].name",
                "spec.containers[0].imagePullPolicy",
                "spec.containers[0].livenessProbe"
            ]
        );
        let forever = pod(json!({"name": "c", "image": "i"}), json!({"activeDeadlineSeconds": 0}));
        assert_eq!(fields("pods", forever), ["spec.activeDeadlineSeconds"]);
        let twice = json!({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists", "value": "x"}]});
        assert_eq!(
            fields("pods", pod(json!({"name": "c", "image": "i"}), twice)),
            ["spec.volumes[1].name", "spec.tolerations[0].operator"]
        );

        let service = |spec: Value| json!({"spec": spec});
        assert!(fields("services", service(json!({"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81, "targetPort": "web"}]}))).is_empty());
        assert_eq!(
            fields(
                "services",
                service(
                    json!({"ports": [{"port": 80}, {"port": 80, "protocol": "HTTP", "targetPort": "bad_name!"}]})
                )
            ),
            [
                "spec.ports[0].name",
                "spec.ports[1].name",
                "spec.ports[1].protocol",
                "spec.ports[1].targetPort"
            ]
        );
        assert_eq!(
            fields("services", service(json!({"type": "ExternalName"}))),
            ["spec.externalName"]
        );
        assert_eq!(
            fields(
                "services",
                service(json!({"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}))
            ),
            ["spec.ports[1]"]
        );

        assert_eq!(
            fields("secrets", json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}})),
            ["data[tls.key]"]
        );
        let not_json = json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "bm90IGpzb24="}});
        assert_eq!(fields("secrets", not_json), ["data[.dockerconfigjson]"]);
        // The older dockercfg too: required, and a JSON object (`[1]` is not).
        assert_eq!(
            fields("secrets", json!({"type": "kubernetes.io/dockercfg"})),
            ["data[.dockercfg]"]
        );
        let array = json!({"metadata": {"name": "x"}, "type": "kubernetes.io/dockercfg",
            "data": {".dockercfg": "WzFd"}});
        let errors = validate_object(find("secrets"), &array);
        assert_eq!(
            errors[0].message,
            "Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go \
             value of type map[string]interface {}"
        );
        // Sizes are of the bytes held: exactly 1 MiB (base64 with padding) is fine.
        use base64::Engine as _;
        let mib = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 1 << 20]);
        assert!(fields("secrets", json!({"data": {"a": mib}})).is_empty());
        assert!(fields("configmaps", json!({"binaryData": {"a": mib}})).is_empty());
        // A ConfigMap's key in both maps is told at `data`; too big is the whole object's.
        let both =
            json!({"metadata": {"name": "x"}, "data": {"k": "v"}, "binaryData": {"k": "dg=="}});
        let errors = validate_object(find("configmaps"), &both);
        assert_eq!(
            (errors[0].field.as_str(), errors[0].message.as_str()),
            ("data[k]", "Invalid value: \"k\": duplicate of key present in binaryData")
        );
        let big = json!({"data": {"a": "x".repeat(600_000)}, "binaryData": {"b": mib}});
        assert_eq!(fields("configmaps", big), [""]);
        assert_eq!(
            fields("persistentvolumeclaims", json!({"spec": {}})),
            ["spec.accessModes", "spec.resources[storage]"]
        );
    }

    #[test]
    fn a_generate_name_is_checked_as_the_start_of_a_name() {
        // A function, not a closure (see `named` below).
        fn fields(meta: Value) -> Vec<String> {
            let configmaps = crate::model::resources::find("", "v1", "configmaps").unwrap();
            let object = json!({"metadata": meta});
            let errors = validate_generate_name(configmaps, &object);
            let errors = errors.into_iter().chain(validate_object(configmaps, &object));
            errors.map(|e| format!("{}: {}", e.field, e.message)).collect()
        }
        let refused = fields(json!({"generateName": "Bad_", "name": "Bad_x1y2z"}));
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].starts_with("metadata.generateName: Invalid value: \"Bad_\""));
        assert!(refused[1].starts_with("metadata.name: Invalid value: \"Bad_x1y2z\""));
        // A prefix ending in '-' is fine: what follows it makes the name.
        assert!(fields(json!({"generateName": "web-", "name": "web-x1y2z"})).is_empty());
        assert!(fields(json!({"generateName": "-", "name": "-x1y2z"})).len() == 2);
        assert!(fields(json!({"generateName": "é-", "name": "é-x1y2z"})).len() == 2);
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(mask_trailing_dash("-"), "-");
        assert_eq!(mask_trailing_dash("é-"), "éa");
        assert_eq!(mask_trailing_dash("web"), "web");
        // Updates do not look at it: an object stored with one keeps being updatable.
        let configmaps = crate::model::resources::find("", "v1", "configmaps").unwrap();
        let stored = json!({"metadata": {"name": "ok", "generateName": "Bad_"}});
        assert!(validate_object(configmaps, &stored).is_empty());
        // RBAC's names are path segments, a prefix checked unmasked.
        let roles = crate::model::resources::find("rbac.authorization.k8s.io", "v1", "roles");
        let role = json!({"metadata": {"name": "x", "generateName": "%-"}});
        assert_eq!(validate_generate_name(roles.unwrap(), &role).len(), 1);
    }

    #[test]
    fn data_keys_sizes_owner_references_and_leases_are_checked() {
        let find = |plural| crate::model::resources::find("", "v1", plural).unwrap();
        let leases = crate::model::resources::find("coordination.k8s.io", "v1", "leases").unwrap();
        // A function, not a closure: rustc 1.95 in release mode frees twice the argument of a
        // closure called twice with the same constant (rust-lang/rust#155241).
        fn named(mut object: Value) -> Value {
            object["metadata"] = json!({"name": "x"});
            object
        }
        let fields = |resource, object: Value| -> Vec<String> {
            validate_object(resource, &named(object)).into_iter().map(|e| e.field).collect()
        };
        assert!(fields(find("configmaps"), json!({"data": {"a.b-C_1": "v"}})).is_empty());
        assert_eq!(fields(find("configmaps"), json!({"data": {"a b": "v"}})), ["data[a b]"]);
        // A value is quoted as Go quotes it, a control character as `\x01`.
        let control = validate_object(find("configmaps"), &named(json!({"data": {"k\u{1}": "v"}})));
        assert!(control[0].message.starts_with(r#"Invalid value: "k\x01": "#), "{control:?}");
        assert_eq!(
            fields(find("configmaps"), json!({"data": {"k": "v"}, "binaryData": {"k": "dg=="}})),
            ["data[k]"]
        );
        let big = "x".repeat(MAX_DATA_BYTES + 1);
        assert_eq!(fields(find("configmaps"), json!({"data": {"k": big}})), [""]);
        let encoded = "eHh4".repeat(MAX_DATA_BYTES / 3);
        assert!(
            fields(find("secrets"), json!({"data": {"k": encoded}})).is_empty(),
            "1 MiB decoded"
        );
        let over = "eHh4".repeat(MAX_DATA_BYTES / 3 + 1);
        assert_eq!(fields(find("secrets"), json!({"data": {"k": over}})), ["data"]);
        assert_eq!(
            fields(leases, json!({"spec": {"leaseDurationSeconds": 0}})),
            ["spec.leaseDurationSeconds"]
        );
        let mut owned = named(json!({}));
        owned["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "p"}]);
        let errors = validate_object(find("configmaps"), &owned);
        assert_eq!(errors[0].field, "metadata.ownerReferences.uid");
        let mut annotated = named(json!({}));
        annotated["metadata"]["annotations"] = json!({"a": "y".repeat(MAX_ANNOTATIONS_BYTES)});
        assert_eq!(
            validate_object(find("configmaps"), &annotated)[0].field,
            "metadata.annotations"
        );
    }

    #[test]
    fn immutable_config_maps_and_secrets_keep_their_content_and_secrets_their_type() {
        let cms = crate::model::resources::find("", "v1", "configmaps").unwrap();
        let secrets = crate::model::resources::find("", "v1", "secrets").unwrap();
        let frozen = json!({"immutable": true, "data": {"a": "1"}});
        let labelled =
            json!({"metadata": {"labels": {"x": "y"}}, "immutable": true, "data": {"a": "1"}});
        assert!(validate_update(cms, &frozen, &labelled).is_empty(), "metadata may change");
        let changed =
            validate_update(cms, &frozen, &json!({"immutable": true, "data": {"a": "2"}}));
        assert_eq!((changed[0].reason, changed[0].field.as_str()), ("FieldValueForbidden", "data"));
        let thawed =
            validate_update(cms, &frozen, &json!({"immutable": false, "data": {"a": "1"}}));
        assert_eq!(thawed[0].field, "immutable");
        let open = json!({"data": {"a": "1"}});
        assert!(validate_update(cms, &open, &json!({"immutable": true})).is_empty());
        let tls = json!({"type": "kubernetes.io/tls", "data": {}});
        let retyped = validate_update(secrets, &tls, &json!({"type": "Opaque", "data": {}}));
        assert_eq!((retyped[0].field.as_str(), retyped[0].reason), ("type", "FieldValueInvalid"));
        assert!(validate_update(secrets, &tls, &json!({"type": "kubernetes.io/tls"})).is_empty());
    }

    #[test]
    fn quantities_protocols_and_restart_policies_are_checked() {
        let pods = crate::model::resources::find("", "v1", "pods").unwrap();
        let pod = |container: Value, policy: &str| json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": policy, "containers": [container]}});
        let good = json!({"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "UDP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": 2}}});
        assert!(validate_object(pods, &pod(good, "Always")).is_empty());
        let bad = json!({"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "HTTP"}],
            "resources": {"requests": {"cpu": "lots", "memory": "-1Gi"}}});
        let errors = validate_object(pods, &pod(bad, "Sometimes"));
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.containers[0].ports[0].protocol",
                "spec.containers[0].resources.requests[cpu]",
                "spec.containers[0].resources.requests[memory]",
                "spec.restartPolicy"
            ],
            "{errors:?}"
        );
        let over = json!({"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}});
        let errors = validate_object(pods, &pod(over, "Always"));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "spec.containers[0].resources.requests");
        assert_eq!(
            errors[0].message,
            "Invalid value: \"1500m\": must be less than or equal to cpu limit of 1"
        );
    }

    #[test]
    fn only_images_deadlines_and_added_tolerations_change() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "a", "ports": [{"containerPort": 80}]}],
            "tolerations": [{"key": "k", "operator": "Exists"}]}});
        let mut image = old.clone();
        image["spec"]["containers"][0]["image"] = json!("b");
        image["spec"]["activeDeadlineSeconds"] = json!(30);
        image["spec"]["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "other", "operator": "Exists"}));
        assert!(validate_pod_update(&old, &image).is_empty());
        let mut ports = old.clone();
        ports["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(81);
        let refused = &validate_pod_update(&old, &ports)[0];
        assert_eq!(refused.reason, "FieldValueForbidden");
        // The refusal says what changed.
        assert!(
            refused.message.ends_with(
                "previously negative)\n  - spec.containers[0].ports[0].containerPort: 80\n  \
                 + spec.containers[0].ports[0].containerPort: 81"
            ),
            "{}",
            refused.message
        );
        let mut added = old.clone();
        added["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "d", "image": "a"}));
        assert_eq!(
            messages(&validate_pod_update(&old, &added)),
            ["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
        // A negative grace period may be mended to 1, and only to 1.
        let mut negative = old.clone();
        negative["spec"]["terminationGracePeriodSeconds"] = json!(-5);
        let mut one = negative.clone();
        one["spec"]["terminationGracePeriodSeconds"] = json!(1);
        assert!(validate_pod_update(&negative, &one).is_empty());
        one["spec"]["terminationGracePeriodSeconds"] = json!(2);
        assert!(!validate_pod_update(&negative, &one).is_empty());
        let mut dropped = old.clone();
        dropped["spec"]["tolerations"] = json!([]);
        assert_eq!(
            messages(&validate_pod_update(&old, &dropped)),
            ["spec.tolerations: Forbidden: existing toleration can not be modified except its \
              tolerationSeconds"]
        );
        // Its tolerationSeconds may change.
        let timed = json!({"key": "k", "operator": "Exists", "effect": "NoExecute"});
        let (mut before, mut after) = (old.clone(), old.clone());
        before["spec"]["tolerations"][0] = timed.clone();
        after["spec"]["tolerations"][0] = timed;
        before["spec"]["tolerations"][0]["tolerationSeconds"] = json!(300);
        after["spec"]["tolerations"][0]["tolerationSeconds"] = json!(10);
        assert!(validate_pod_update(&before, &after).is_empty());
        let mut node = old.clone();
        node["spec"]["nodeName"] = json!("n1");
        assert!(!validate_pod_update(&old, &node).is_empty(), "binding goes through pods/binding");
    }
}

/// Errors as `field: message` lines, for tests' assertions.
#[cfg(test)]
fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
}

#[cfg(test)]
mod kind_tests {
    use serde_json::json;

    use super::*;
    use crate::model::resources::find;

    #[test]
    fn slices_bindings_classes_nodes_and_generations() {
        let fields = |plural: &str, group: &str, object: Value| -> Vec<String> {
            let resource = find(group, "v1", plural).unwrap();
            let errors = validate_object(resource, &object);
            errors.into_iter().map(|e| e.field).collect()
        };
        let slice = json!({"metadata": {"name": "s"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1", "0.0.0.0", "bogus"], "hostname": "Bad_Host",
                "nodeName": "Bad_Node", "hints": {"forZones": [{"name": "a"}, {"name": "a"}]}}],
            "ports": [{"name": "Bad_Name", "port": 80}, {"port": 81}, {"port": 82},
                {"name": "x", "protocol": "HTTP", "appProtocol": "Bad Proto"}]});
        assert_eq!(
            fields("endpointslices", "discovery.k8s.io", slice),
            [
                "endpoints[0].addresses[1]",
                "endpoints[0].addresses[2]",
                "endpoints[0].addresses[2]",
                "endpoints[0].nodeName",
                "endpoints[0].hostname",
                "endpoints[0].hints.forZones[1].name",
                "ports[0].name",
                "ports[2].name",
                "ports[3].protocol",
                "ports[3].appProtocol",
            ]
        );
        let empty = json!({"metadata": {"name": "s"}, "addressType": "IPv4",
            "endpoints": [{"addresses": []}]});
        let slices = find("discovery.k8s.io", "v1", "endpointslices").unwrap();
        assert_eq!(
            messages(&validate_object(slices, &empty)),
            ["endpoints[0].addresses: Required value: must contain at least 1 address"]
        );
        let binding = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "a/b"},
            "subjects": [{"kind": "ServiceAccount", "name": "Bad_Name"}]});
        let rbac = "rbac.authorization.k8s.io";
        assert_eq!(fields("rolebindings", rbac, binding), ["roleRef.name", "subjects[0].name"]);
        let aggregated = json!({"metadata": {"name": "r"}, "aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"a b": "c"}}]}});
        assert_eq!(
            fields("clusterroles", rbac, aggregated),
            [
                "aggregationRule.clusterRoleSelectors[0].matchLabels",
                "aggregationRule.clusterRoleSelectors[0]"
            ]
        );
        let clusterroles = find(rbac, "v1", "clusterroles").unwrap();
        let rules = json!({"metadata": {"name": "r"}, "rules": [
            {"verbs": []},
            {"verbs": ["get"], "nonResourceURLs": ["/x"], "resourceNames": ["a"]}]});
        assert_eq!(
            messages(&validate_object(clusterroles, &rules)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
                "rules[1].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs",
            ]
        );
        let bindings = find(rbac, "v1", "clusterrolebindings").unwrap();
        let nameless = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "Group", "apiGroup": rbac, "name": ""}]});
        assert_eq!(
            messages(&validate_object(bindings, &nameless)),
            [
                "subjects[0].name: Required value",
                "subjects[0].name: Invalid value: \"\": group name cannot be empty",
            ]
        );
        let claim = json!({"metadata": {"name": "c"}, "spec": {"storageClassName": "Bad_SC",
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(fields("persistentvolumeclaims", "", claim), ["spec.storageClassName"]);
        let node = json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "bogus"},
            "status": {"capacity": {"cpu": "-1", "pods": "1500m", "memory": "1Gi"}}});
        assert_eq!(
            fields("nodes", "", node),
            ["status.capacity.cpu", "status.capacity.pods", "spec.podCIDRs[0]"]
        );
        let negative = json!({"metadata": {"name": "c", "generation": -5}});
        assert_eq!(fields("configmaps", "", negative), ["metadata.generation"]);
        let old = json!({"metadata": {"name": "c", "generation": 3}});
        let new = json!({"metadata": {"name": "c", "generation": 2}});
        assert_eq!(
            messages(&validate_metadata_update(&old, &new)),
            ["metadata.generation: Invalid value: 2: must not be decremented"]
        );
        let bindings = find(rbac, "v1", "rolebindings").unwrap();
        let changed = json!({"roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "view"}});
        let before = json!({"roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "edit"}});
        assert_eq!(
            messages(&validate_update(bindings, &before, &changed)),
            ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", \
              Kind:\"ClusterRole\", Name:\"view\"}: cannot change roleRef"]
        );
    }

    #[test]
    fn a_pod_s_own_condition_types_are_qualified_names() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"},
                {"type": "example.com/gate", "status": "True"},
                {"type": "bad type!", "status": "True"}]}});
        let found = messages(&validate_object(pods, &pod));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("status.conditions[2].Type: Invalid value: \"bad type!\""));
    }

    #[test]
    fn a_pod_spec_s_names_ids_and_sysctls() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "i", "terminationMessagePolicy": "Bogus"}],
            "subdomain": "Bad_Host", "hostPID": true, "shareProcessNamespace": true,
            "hostNetwork": true,
            "securityContext": {"fsGroup": -1, "sysctls": [{"name": "bad name"},
                {"name": "net.core.somaxconn"}, {"name": "net.core.somaxconn"}, {"name": ""}]},
            "readinessGates": [{"conditionType": "bad cond"}], "runtimeClassName": "Bad_Name",
            "os": {"name": "plan9"}}});
        let found = messages(&validate_object(pods, &pod));
        let fields: Vec<&str> = found.iter().map(|m| m.split(": ").next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "spec.containers[0].terminationMessagePolicy",
                "spec.subdomain",
                "spec.securityContext.fsGroup",
                "spec.securityContext.shareProcessNamespace",
                "spec.securityContext.sysctls[0].name",
                "spec.securityContext.sysctls[1].name",
                "spec.securityContext.sysctls[2].name",
                "spec.securityContext.sysctls[2].name",
                "spec.securityContext.sysctls[3].name",
                "spec.readinessGates[0].conditionType",
                "spec.runtimeClassName",
                "spec.os",
            ],
            "{found:#?}"
        );
        assert_eq!(
            found[3],
            "spec.securityContext.shareProcessNamespace: Invalid value: true: \
             ShareProcessNamespace and HostPID cannot both be enabled"
        );
        assert!(
            found[4].ends_with(
                "regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
            ),
            "{}",
            found[4]
        );
        assert_eq!(
            found[5],
            "spec.securityContext.sysctls[1].name: Invalid value: \"net.core.somaxconn\": may \
             not be specified when 'hostNetwork' is true"
        );
        assert_eq!(
            found[11],
            "spec.os: Unsupported value: \"plan9\": supported values: \"linux\", \"windows\""
        );
    }

    #[test]
    fn events_agree_with_their_involved_objects_namespace() {
        let events = find("", "v1", "events").unwrap();
        let event = |namespace: &str, involved: Value| json!({"metadata": {"name": "e", "namespace": namespace}, "involvedObject": involved});
        let of_pod = json!({"kind": "Pod", "name": "p", "namespace": "a"});
        assert!(validate_object(events, &event("a", of_pod.clone())).is_empty());
        assert_eq!(
            messages(&validate_object(events, &event("b", of_pod))),
            ["involvedObject.namespace: Invalid value: \"a\": does not match event.namespace"]
        );
        let of_node = json!({"kind": "Node", "name": "n"});
        assert!(validate_object(events, &event("default", of_node.clone())).is_empty());
        assert_eq!(validate_object(events, &event("b", of_node.clone())).len(), 1);
        let mut newer = event("default", of_node);
        newer["eventTime"] = json!("2026-01-01T00:00:00.000000Z");
        newer["reason"] = json!("r".repeat(129));
        assert_eq!(
            messages(&validate_object(events, &newer)),
            [
                "reportingComponent: Required value",
                "reportingInstance: Required value",
                "action: Required value",
                "reason: Invalid value: \"\": can have at most 128 characters",
            ]
        );
    }

    #[test]
    fn endpoints_have_addresses_and_named_ports() {
        let endpoints = find("", "v1", "endpoints").unwrap();
        let good = json!({"metadata": {"name": "e"}, "subsets": [{
            "addresses": [{"ip": "127.64.0.2", "nodeName": "n1"}],
            "ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}]});
        assert!(validate_object(endpoints, &good).is_empty());
        let bad = json!({"metadata": {"name": "e"}, "subsets": [
            {"addresses": [{"ip": "not-an-ip"}], "ports": [{"port": 80}, {"port": 0, "name": "b"}]},
            {"ports": [{"port": 80, "protocol": "HTTP"}]}]});
        assert_eq!(
            messages(&validate_object(endpoints, &bad)),
            [
                "subsets[0].addresses[0].ip: Invalid value: \"not-an-ip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "subsets[0].ports[0].name: Required value",
                "subsets[0].ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
                "subsets[1].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
    }

    #[test]
    fn containers_images_env_sources_and_selectors_are_checked() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "image": " busybox", "env": [
                {"name": "A", "valueFrom": {}},
                {"name": "B", "value": "x", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "C", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"},
                    "secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "D", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}]}});
        assert_eq!(
            messages(&validate_object(pods, &pod)),
            [
                "spec.containers[0].env[0].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                "spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
                "spec.containers[0].env[2].valueFrom: Invalid value: \"\": may not have more than one field specified at a time",
                "spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
            ]
        );
        let services = find("", "v1", "services").unwrap();
        let service = json!({"metadata": {"name": "s"},
            "spec": {"selector": {"bad key!": "v", "app": "-x"}, "ports": [{"port": 80}]}});
        let fields: Vec<String> =
            validate_object(services, &service).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            ["spec.selector", "spec.selector"],
            "at the map, as Kubernetes has them"
        );
    }

    #[test]
    fn nodes_keep_their_pod_networks_and_provider() {
        let nodes = find("", "v1", "nodes").unwrap();
        let node = |cidr: &str, provider: &str| json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": provider}});
        let unset = json!({"spec": {}});
        assert!(validate_update(nodes, &unset, &node("127.65.0.0/24", "kplane://n")).is_empty());
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["a/keep"]}});
        let more = json!({"metadata": {"finalizers": ["a/keep", "b/more"]}});
        let errors = validate_metadata_update(&deleting, &more);
        assert_eq!(errors[0].field, "metadata.finalizers");
        assert!(errors[0].message.ends_with(r#"found new finalizers []string{"b/more"}"#));
        assert!(validate_metadata_update(&deleting, &json!({})).is_empty(), "removing is fine");
        assert!(validate_metadata_update(&json!({}), &more).is_empty(), "not being deleted");
        let moved =
            validate_update(nodes, &node("127.65.0.0/24", "a"), &node("127.66.0.0/24", "b"));
        assert_eq!(
            messages(&moved),
            [
                "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid",
                "spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid",
            ]
        );
    }

    fn pods_errors(spec: Value) -> Vec<String> {
        let pods = find("", "v1", "pods").unwrap();
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
        messages(&validate_object(pods, &json!({"metadata": {"name": "p"}, "spec": spec})))
    }

    #[test]
    fn volumes_take_one_source_and_what_it_names() {
        let volume = |source: Value| {
            let mut volume = source;
            volume["name"] = json!("v");
            pods_errors(json!({"volumes": [volume]}))
        };
        assert_eq!(
            volume(
                json!({"emptyDir": {}, "hostPath": {"path": "/x"}, "secret": {"secretName": "s"}})
            ),
            [
                "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
                "spec.volumes[0].secret: Forbidden: may not specify more than 1 volume type",
            ]
        );
        assert_eq!(
            volume(json!({"secret": {"defaultMode": 99999}})),
            [
                "spec.volumes[0].secret.secretName: Required value",
                "spec.volumes[0].secret.defaultMode: Invalid value: 99999: must be a number \
                 between 0 and 0777 (octal), both inclusive",
            ]
        );
        assert_eq!(
            volume(json!({"configMap": {}})),
            ["spec.volumes[0].configMap.name: Required value"]
        );
        assert!(volume(json!({"configMap": {"name": "c", "defaultMode": 420}})).is_empty());
    }

    #[test]
    fn mounts_probes_and_node_selectors_as_kubernetes_checks_them() {
        let container = json!({"name": "c", "image": "i",
            "volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/a"}],
            "livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}});
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [container],
            "volumes": [{"name": "v", "emptyDir": {}}], "nodeSelector": {"bad key!": "v"}}});
        assert_eq!(
            messages(&validate_object(pods, &pod)),
            [
                "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/a\": must be unique",
                "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than \
                 1 handler type",
                "spec.nodeSelector: Invalid value: \"bad key!\": name part must consist of \
                 alphanumeric characters, '-', '_' or '.', and must start and end with an \
                 alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used \
                 for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ]
        );
    }

    #[test]
    fn scheduling_gates_are_unique_qualified_names_and_keep_a_pod_off_nodes() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1",
            "containers": [{"name": "c", "image": "i"}],
            "schedulingGates": [{"name": "example.com/quota"}, {"name": "bad gate"},
                {"name": "example.com/quota"}]}});
        assert_eq!(
            messages(&validate_pod_create(&pod)),
            ["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]
        );
        assert_eq!(
            messages(&validate_object(pods, &pod)),
            [
                "spec.schedulingGates[1]: Invalid value: \"bad gate\": name part must consist \
                 of alphanumeric characters, '-', '_' or '.', and must start and end with an \
                 alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used \
                 for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.schedulingGates[2]: Duplicate value: \"example.com/quota\"",
            ]
        );
    }

    #[test]
    fn probes_counts_periods_and_grace_as_kubernetes_checks_them() {
        let pods = find("", "v1", "pods").unwrap();
        let exec = json!({"command": ["true"]});
        let container = json!({"name": "c", "image": "i",
            "livenessProbe": {"exec": exec, "initialDelaySeconds": -1, "timeoutSeconds": -2,
                "periodSeconds": -3, "successThreshold": 2, "failureThreshold": -5,
                "terminationGracePeriodSeconds": 0},
            "readinessProbe": {"exec": exec, "successThreshold": 3,
                "terminationGracePeriodSeconds": 10},
            "startupProbe": {"exec": exec, "successThreshold": -1,
                "terminationGracePeriodSeconds": 10}});
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [container]}});
        assert_eq!(
            messages(&validate_object(pods, &pod)),
            [
                "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must \
                 be greater than or equal to 0",
                "spec.containers[0].livenessProbe.timeoutSeconds: Invalid value: -2: must be \
                 greater than or equal to 0",
                "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -3: must be \
                 greater than or equal to 0",
                "spec.containers[0].livenessProbe.failureThreshold: Invalid value: -5: must be \
                 greater than or equal to 0",
                "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: \
                 0: must be greater than 0",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid \
                 value: 10: must not be set for readinessProbes",
                "spec.containers[0].startupProbe.successThreshold: Invalid value: -1: must be \
                 greater than or equal to 0",
                "spec.containers[0].startupProbe.successThreshold: Invalid value: -1: must be 1",
            ]
        );
    }

    #[test]
    fn lifecycle_hooks_take_one_complete_handler_and_plain_init_containers_none() {
        let pods = find("", "v1", "pods").unwrap();
        let hooked = json!({"name": "c", "image": "i", "ports": [{"name": "Web", "containerPort": 80}],
            "lifecycle": {
                "postStart": {"exec": {"command": []}},
                "preStop": {"sleep": {"seconds": 31}, "httpGet": {"path": "/x", "port": "web", "scheme": "HTTP"}}}});
        let init = json!({"name": "i", "image": "i", "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
            "readinessProbe": {"httpGet": {"path": "", "port": 0, "scheme": "FTP"}}});
        let sidecar = json!({"name": "s", "image": "i", "restartPolicy": "Always",
            "lifecycle": {"postStart": {}, "preStop": {"sleep": {"seconds": 30}}},
            "startupProbe": {"tcpSocket": {"port": "--x"}}});
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [hooked],
            "initContainers": [init, sidecar], "terminationGracePeriodSeconds": 30}});
        assert_eq!(
            messages(&validate_object(pods, &pod)),
            [
                "spec.containers[0].ports[0].name: Invalid value: \"Web\": must contain only \
                 alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].lifecycle.postStart.exec.command: Required value",
                "spec.containers[0].lifecycle.preStop.sleep: Forbidden: may not specify more \
                 than 1 handler type",
                "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers \
                 without restartPolicy=Always",
                "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init \
                 containers without restartPolicy=Always",
                "spec.initContainers[1].lifecycle.postStart: Required value: must specify a \
                 handler type",
                "spec.initContainers[1].startupProbe.tcpSocket.port: Invalid value: \"--x\": \
                 must not contain consecutive hyphens",
                "spec.initContainers[1].startupProbe.tcpSocket.port: Invalid value: \"--x\": \
                 must not begin or end with a hyphen",
            ]
        );
        // A sleep longer than the grace period; an HTTP GET without path, port or scheme.
        let long = json!({"name": "c", "image": "i", "lifecycle": {
            "preStop": {"sleep": {"seconds": 10}},
            "postStart": {"httpGet": {"path": "", "port": 0, "scheme": "FTP",
                "httpHeaders": [{"name": "X Bad", "value": "v"}]}}}});
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [long],
            "terminationGracePeriodSeconds": 5}});
        assert_eq!(
            messages(&validate_object(pods, &pod)),
            [
                "spec.containers[0].lifecycle.postStart.httpGet.path: Required value",
                "spec.containers[0].lifecycle.postStart.httpGet.port: Invalid value: 0: must be \
                 between 1 and 65535, inclusive",
                "spec.containers[0].lifecycle.postStart.httpGet.scheme: Unsupported value: \
                 \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
                "spec.containers[0].lifecycle.postStart.httpGet.httpHeaders: Invalid value: \
                 \"X Bad\": a valid HTTP header must consist of alphanumeric characters or '-' \
                 (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
                "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 10: must be greater \
                 than 0 and less than terminationGracePeriodSeconds (5). Please enable \
                 PodLifecycleSleepActionAllowZero feature gate if you need a sleep of zero \
                 duration.",
            ]
        );
    }

    #[test]
    fn controllers_services_secrets_and_taints_as_kubernetes_checks_them() {
        let rcs = find("", "v1", "replicationcontrollers").unwrap();
        let rc = json!({"metadata": {"name": "r"}, "spec": {"selector": {"a": "b"},
            "minReadySeconds": -1, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 5,
                "containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(
            messages(&validate_object(rcs, &rc)),
            [
                "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported \
                 values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: \
                 activeDeadlineSeconds in ReplicationController is not Supported",
            ]
        );
        // Kubernetes' order (replicas after the selector), the labels as Go prints a map.
        let mismatched = json!({"metadata": {"name": "r"}, "spec": {"selector": {"a": "b"},
            "replicas": -1, "template": {"metadata": {"labels": {"z": "1", "a": "c"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        assert_eq!(
            messages(&validate_object(rcs, &mismatched)),
            [
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\", \
                 \"z\":\"1\"}: `selector` does not match template `labels`",
            ]
        );
        let configmaps = find("", "v1", "configmaps").unwrap();
        let owner = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name,
            "uid": format!("u-{name}"), "controller": true})
        };
        let owned = json!({"metadata": {"name": "o", "ownerReferences": [owner("a"), owner("b")]}});
        assert_eq!(
            messages(&validate_object(configmaps, &owned)),
            ["metadata.ownerReferences: Invalid value: 2: Only one reference can have Controller \
              set to true. Found \"true\" in references for ConfigMap/a and ConfigMap/b"]
        );
        let services = find("", "v1", "services").unwrap();
        let service = json!({"metadata": {"name": "s"}, "spec": {"type": "ExternalName",
            "externalName": "bad_name!.", "sessionAffinity": "Bogus"}});
        let errors = messages(&validate_object(services, &service));
        assert!(
            errors[0].starts_with(
                "spec.externalName: Invalid value: \"bad_name!\": a lowercase RFC 1123 subdomain"
            ),
            "{errors:?}"
        );
        assert_eq!(
            errors[1],
            "spec.sessionAffinity: Unsupported value: \"Bogus\": supported values: \"ClientIP\", \"None\""
        );
        let fine = json!({"metadata": {"name": "s"}, "spec": {"type": "ExternalName",
            "externalName": "db.example.com."}});
        assert!(validate_object(services, &fine).is_empty());
        let secrets = find("", "v1", "secrets").unwrap();
        assert_eq!(
            messages(&validate_object(secrets, &json!({"metadata": {}}))),
            ["metadata.name: Required value: name or generateName is required"]
        );
        let secret = |kind: &str| json!({"metadata": {"name": "s"}, "type": kind});
        assert_eq!(
            messages(&validate_object(secrets, &secret("kubernetes.io/service-account-token"))),
            ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        assert_eq!(
            messages(&validate_object(secrets, &secret("kubernetes.io/basic-auth"))),
            ["data[username]: Required value", "data[password]: Required value"]
        );
        let nodes = find("", "v1", "nodes").unwrap();
        let node = json!({"metadata": {"name": "n"}, "spec": {"taints": [
            {"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "k", "effect": "NoExecute"}]}});
        assert_eq!(
            messages(&validate_object(nodes, &node)),
            ["metadata.taints[1]: Duplicate value: core.Taint{Key:\"k\", Value:\"v\", \
              Effect:\"NoSchedule\", TimeAdded:(*v1.Time)(nil)}: taints must be unique by key \
              and effect pair"]
        );
    }

    #[test]
    fn a_pod_s_addresses_are_ips_one_per_family() {
        let pods = find("", "v1", "pods").unwrap();
        let with = |ips: Value| {
            let pod = json!({"metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"podIPs": ips}});
            messages(&validate_object(pods, &pod))
        };
        assert!(with(json!([{"ip": "127.64.0.2"}, {"ip": "fd00::2"}])).is_empty());
        assert_eq!(
            with(json!([{"ip": "notanip"}])),
            ["status.podIPs[0]: Invalid value: \"notanip\": must be a valid IP address, (e.g. \
              10.9.8.7 or 2001:db8::ffff)"]
        );
        assert_eq!(
            with(json!([{"ip": "127.64.0.2"}, {"ip": "127.64.0.2"}])),
            [
                "status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:\"127.64.0.2\"}, \
                 core.PodIP{IP:\"127.64.0.2\"}}: may specify no more than one IP for each IP family",
                "status.podIPs[1]: Duplicate value: core.PodIP{IP:\"127.64.0.2\"}",
            ]
        );
    }

    #[test]
    fn affinity_terms_as_kubernetes_checks_them() {
        let errors = |affinity: Value| pods_errors(json!({"affinity": affinity}));
        let required = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
        assert_eq!(
            errors(json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": []}}})),
            [format!("{required}.nodeSelectorTerms: Required value: must have at least one node selector term")]
        );
        let term = |expression: Value| {
            errors(json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}))
        };
        let at = format!("{required}.nodeSelectorTerms[0].matchExpressions[0]");
        assert_eq!(
            term(json!({"key": "zone", "operator": "Foo"})),
            [format!("{at}.operator: Invalid value: \"Foo\": not a valid selector operator")]
        );
        assert_eq!(
            term(json!({"key": "zone", "operator": "In"})),
            [format!(
                "{at}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )]
        );
        assert_eq!(
            term(json!({"key": "cpus", "operator": "Gt", "values": ["1", "2"]})),
            [format!("{at}.values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'")]
        );
        assert!(term(json!({"key": "zone", "operator": "In", "values": ["a"]})).is_empty());
        let preferred = errors(json!({"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}],
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]}}));
        let anti = "spec.affinity.podAntiAffinity";
        assert_eq!(preferred[0], format!("{anti}.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"));
        assert_eq!(
            preferred.last().unwrap(),
            &format!("{anti}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100")
        );
    }

    /// The messages for a pod with this whole spec.
    fn spec_errors(spec: Value) -> Vec<String> {
        let pods = find("", "v1", "pods").unwrap();
        messages(&validate_object(pods, &json!({"metadata": {"name": "p"}, "spec": spec})))
    }

    #[test]
    fn field_refs_name_fields_a_pod_has_in_the_places_that_take_them() {
        let env = |field_ref: Value| {
            spec_errors(json!({"containers": [{"name": "c", "image": "i",
                "env": [{"name": "E", "valueFrom": {"fieldRef": field_ref}}]}]}))
        };
        let at = "spec.containers[0].env[0].valueFrom.fieldRef";
        let v1 = |path: &str| json!({"apiVersion": "v1", "fieldPath": path});
        for fine in ["metadata.name", "status.podIPs", "metadata.labels['app']", "spec.host"] {
            assert!(env(v1(fine)).is_empty(), "{fine}");
        }
        assert_eq!(
            env(v1("spec.restartPolicy")),
            [format!("{at}.fieldPath: Unsupported value: \"spec.restartPolicy\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"")]
        );
        assert_eq!(
            env(v1("status.foo")),
            [format!("{at}.fieldPath: Invalid value: \"status.foo\": error converting fieldPath: field label not supported: status.foo")]
        );
        assert_eq!(
            env(v1("metadata.name['x']")),
            [format!("{at}.fieldPath: Invalid value: \"metadata.name['x']\": error converting fieldPath: field label does not support subscript: metadata.name['x']")]
        );
        assert_eq!(
            env(json!({"apiVersion": "v2", "fieldPath": "metadata.name"})),
            [format!("{at}.fieldPath: Invalid value: \"metadata.name\": error converting fieldPath: unsupported pod version: v2")]
        );
        assert_eq!(env(v1("metadata.labels['-x']")).len(), 1, "a label key");
        assert!(env(v1("metadata.labels['-x']"))[0]
            .starts_with(&format!("{at}: Invalid value: \"-x\"")));
        let volume =
            |source: Value| pods_errors(json!({"volumes": [{"name": "v", "downwardAPI": source}]}));
        let files = |path: &str| json!({"items": [{"path": "f", "fieldRef": v1(path)}]});
        assert!(volume(files("metadata.labels")).is_empty());
        assert_eq!(
            volume(files("spec.nodeName")),
            ["spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: \"spec.nodeName\": supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\""]
        );
        let projected = pods_errors(json!({"volumes": [{"name": "v", "projected": {"sources": [
            {"downwardAPI": files("status.podIP")}]}}]}));
        assert_eq!(projected.len(), 1);
        assert!(projected[0].starts_with("spec.volumes[0].projected.sources[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value"));
    }

    #[test]
    fn host_paths_size_limits_host_ports_and_node_names_as_kubernetes_checks_them() {
        let volume = |source: Value| {
            let mut volume = source;
            volume["name"] = json!("v");
            pods_errors(json!({"volumes": [volume]}))
        };
        assert_eq!(
            volume(json!({"hostPath": {"path": "/data/../etc", "type": "Folder"}})),
            [
                "spec.volumes[0].hostPath.path: Invalid value: \"/data/../etc\": must not contain '..'",
                "spec.volumes[0].hostPath.type: Unsupported value: \"Folder\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"",
            ]
        );
        assert!(volume(json!({"hostPath": {"path": "/data/..x", "type": ""}})).is_empty());
        assert_eq!(
            volume(json!({"emptyDir": {"sizeLimit": "-1Gi"}})),
            ["spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"]
        );
        assert!(volume(json!({"emptyDir": {"sizeLimit": "1Gi"}})).is_empty());
        let volumes = find("", "v1", "persistentvolumes").unwrap();
        let pv = json!({"metadata": {"name": "v"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"}, "hostPath": {"path": "../x"}}});
        assert_eq!(
            messages(&validate_object(volumes, &pv)),
            ["spec.hostPath.path: Invalid value: \"../x\": must not contain '..'"]
        );

        let port = |container_port: u16, host_port: u16| json!({"containerPort": container_port, "hostPort": host_port, "protocol": "TCP"});
        let two = |a: Value, b: Value, host_network: bool| {
            spec_errors(json!({"hostNetwork": host_network, "containers": [
                {"name": "a", "image": "i", "ports": [a]}, {"name": "b", "image": "i", "ports": [b]}]}))
        };
        assert_eq!(
            two(port(80, 8080), port(81, 8080), false),
            ["spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\""]
        );
        assert!(two(port(80, 8080), port(81, 8081), false).is_empty());
        assert_eq!(
            two(port(80, 80), port(81, 8081), true),
            ["spec.containers[1].ports[0].hostPort: Invalid value: 8081: must match `containerPort` when `hostNetwork` is true"]
        );
        // A pod's unset host port is one too (its default is the container port); a
        // template's may stay unset.
        let unset = json!({"containerPort": 80, "protocol": "TCP"});
        let host_network = |of: &str| {
            let spec = json!({"hostNetwork": true, "containers": [{"name": "c", "image": "i",
                "ports": [unset.clone()]}]});
            match of {
                "pod" => spec_errors(spec),
                _ => {
                    let rcs = find("", "v1", "replicationcontrollers").unwrap();
                    let rc = json!({"metadata": {"name": "r"}, "spec": {"replicas": 1,
                        "selector": {"a": "b"}, "template": {"metadata": {"labels": {"a": "b"}},
                        "spec": spec}}});
                    messages(&validate_object(rcs, &rc))
                }
            }
        };
        assert_eq!(host_network("pod").len(), 1);
        assert!(host_network("template").is_empty(), "{:?}", host_network("template"));
        assert_eq!(
            spec_errors(json!({"nodeName": "Node_1", "containers": [{"name": "c", "image": "i"}]})),
            ["spec.nodeName: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
    }

    #[test]
    fn containers_volumes_and_tolerations_are_checked_as_kubernetes_checks_them() {
        let pods = find("", "v1", "pods").unwrap();
        let errors_of = |spec: Value| {
            messages(&validate_object(pods, &json!({"metadata": {"name": "p"}, "spec": spec})))
        };
        // Two containers may each name a port "http"; a container may not name two.
        let port = |name: &str, number: i64| json!({"name": name, "containerPort": number});
        let sidecar = json!({"containers": [
            {"name": "app", "image": "i", "ports": [port("http", 8080)]},
            {"name": "side", "image": "i", "ports": [port("http", 9090), port("http", 9091)]}]});
        assert_eq!(
            errors_of(sidecar),
            ["spec.containers[1].ports[1].name: Duplicate value: \"http\""]
        );
        let policies = json!({
            "initContainers": [{"name": "init", "image": "i", "restartPolicy": "OnFailure"}],
            "containers": [{"name": "app", "image": "i", "restartPolicy": "Always"}]});
        assert_eq!(
            errors_of(policies),
            [
                "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
                "spec.initContainers[0].restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            ]
        );
        let volumes = json!({"volumes": [
            {"name": "a", "persistentVolumeClaim": {}},
            {"name": "b", "nfs": {"path": "x"}},
            {"name": "c", "csi": {}},
            {"name": "d", "ephemeral": {}},
            {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "f", "projected": {"sources": [{"serviceAccountToken": {"path": "", "expirationSeconds": 60}}]}},
            {"name": "g", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p", "mode": 4096}]}}],
            "containers": [{"name": "app", "image": "i", "volumeMounts": [
                {"name": "a", "mountPath": "/a", "subPath": "x", "subPathExpr": "y"},
                {"name": "b", "mountPath": "/b", "mountPropagation": "Bidirectional"},
                {"name": "c", "mountPath": "/c", "mountPropagation": "Sideways"}],
                "resources": {"limits": {"hugepages-2Mi": "100Mi"}}}]});
        assert_eq!(
            errors_of(volumes),
            [
                "spec.volumes[0].persistentVolumeClaim.claimName: Required value",
                "spec.volumes[1].nfs.server: Required value",
                "spec.volumes[1].nfs.path: Invalid value: \"x\": must be an absolute path",
                "spec.volumes[2].csi.driver: Required value",
                "spec.volumes[3].ephemeral.volumeClaimTemplate: Required value",
                "spec.volumes[4].ephemeral.volumeClaimTemplate.spec.accessModes: Required value: at least 1 access mode is required",
                "spec.volumes[4].ephemeral.volumeClaimTemplate.spec.resources[storage]: Required value",
                "spec.volumes[5].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                "spec.volumes[5].projected.path: Required value",
                "spec.volumes[6].configMap.items[0].mode: Invalid value: 4096: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"y\": subPathExpr and subPath are mutually exclusive",
                "spec.containers[0].volumeMounts[1].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
                "spec.containers[0].volumeMounts[2].mountPropagation: Unsupported value: \"Sideways\": supported values: \"Bidirectional\", \"HostToContainer\", \"None\"",
                "spec.containers[0].resources: Forbidden: HugePages require cpu or memory",
            ]
        );
        let tolerations = json!({"containers": [{"name": "app", "image": "i"}], "tolerations": [
            {"key": "k", "operator": "Equal", "value": "has space"},
            {"key": "k", "operator": "Exists", "value": "v"}]});
        let errors = errors_of(tolerations);
        assert!(
            errors[0].starts_with(
                "spec.tolerations[0].operator: Invalid value: \"has space\": a valid label must be"
            ),
            "{errors:?}"
        );
        assert_eq!(
            errors[1],
            "spec.tolerations[1].operator: Invalid value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when `operator` is 'Exists'"
        );
        // With no containers, the rest is still checked.
        let empty = json!({"containers": [], "restartPolicy": "Sometimes"});
        assert_eq!(errors_of(empty).len(), 2);
        // A template's image may carry spaces (only a pod's is refused); its names are checked.
        let templates = find("", "v1", "podtemplates").unwrap();
        let template = json!({"metadata": {"name": "t"}, "template": {"spec": {
            "containers": [{"name": "c", "image": "nginx "}],
            "serviceAccountName": "Bad_SA", "preemptionPolicy": "Sometimes"}}});
        let errors = messages(&validate_object(templates, &template));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("template.spec.serviceAccountName: Invalid value: \"Bad_SA\"")
        );
        assert!(errors[1].starts_with("template.spec.preemptionPolicy: Unsupported value"));
    }

    #[test]
    fn paths_inside_volumes_stay_inside_them() {
        let volume = |source: Value| pods_errors(json!({"volumes": [source]}));
        let config_map = |path: &str| {
            volume(
                json!({"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": path}]}}),
            )
        };
        let at = "spec.volumes[0].configMap.items[0].path";
        assert!(config_map("a/b").is_empty());
        assert_eq!(
            config_map("a/../../b"),
            [format!("{at}: Invalid value: \"a/../../b\": must not contain '..'")]
        );
        assert_eq!(
            config_map("..foo"),
            [format!("{at}: Invalid value: \"..foo\": must not start with '..'")]
        );
        assert_eq!(
            config_map("/abs"),
            [format!("{at}: Invalid value: \"/abs\": must be a relative path")]
        );
        let downward = volume(json!({"name": "v", "downwardAPI": {"items": [{"path": "../x",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}]}}));
        assert_eq!(downward, ["spec.volumes[0].downwardAPI.items[0].path: Invalid value: \"../x\": must not contain '..'"]);
        let projected = volume(json!({"name": "v", "projected": {"sources": [
            {"secret": {"name": "s", "items": [{"key": "", "path": "p"}]}}]}}));
        assert_eq!(
            projected,
            ["spec.volumes[0].projected.sources[0].secret.items[0].key: Required value"]
        );
        // One set of paths across the sources; names required; one kind per source; the
        // default mode in range.
        let projected = volume(json!({"name": "v", "projected": {"defaultMode": 4000, "sources": [
            {"configMap": {"name": "c", "items": [{"key": "a", "path": "same"}]}},
            {"secret": {"items": [{"key": "a", "path": "same"}]},
                "downwardAPI": {"items": [{"path": "ns",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}));
        assert_eq!(
            projected,
            [
                "spec.volumes[0].projected.defaultMode: Invalid value: 4000: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[0].projected.sources[1].secret.name: Required value",
                "spec.volumes[0].projected: Invalid value: \"\": conflicting duplicate paths",
                "spec.volumes[0].projected.sources[1]: Forbidden: may not specify more than 1 volume type per source",
            ]
        );
        let mounted = spec_errors(json!({"volumes": [{"name": "v", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "i",
                "volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "../a"}]}]}));
        assert_eq!(mounted, ["spec.containers[0].volumeMounts.subPath: Invalid value: \"../a\": must not contain '..'"]);
    }

    #[test]
    fn pod_affinity_terms_name_their_namespaces_and_label_keys_as_kubernetes_checks_them() {
        let term = |extra: Value| {
            let mut term =
                json!({"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}});
            term.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            pods_errors(json!({"affinity": {"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]}}}))
        };
        let at = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]";
        assert!(term(json!({"matchLabelKeys": ["ver"], "mismatchLabelKeys": ["team"]})).is_empty());
        assert_eq!(
            term(json!({"matchLabelKeys": ["ver"], "mismatchLabelKeys": ["ver"]})),
            [format!("{at}.matchLabelKeys[0]: Invalid value: \"ver\": exists in both matchLabelKeys and mismatchLabelKeys")]
        );
        assert_eq!(
            term(json!({"labelSelector": null, "matchLabelKeys": ["ver"]})),
            [format!("{at}.matchLabelKeys: Forbidden: must not be specified when labelSelector is not set")]
        );
        assert_eq!(
            term(json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Foo"}]}})),
            [format!("{at}.namespaceSelector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator")]
        );
        let bad_namespace = term(json!({"namespaces": ["Bad_NS"]}));
        assert_eq!(bad_namespace.len(), 1);
        assert!(bad_namespace[0].starts_with(&format!(
            "{at}.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label"
        )));
    }

    #[test]
    fn node_selector_terms_match_fields_by_node_name_only() {
        let fields = |requirement: Value| {
            pods_errors(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [requirement]}]}}}}),
            )
        };
        let at = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0]";
        assert!(
            fields(json!({"key": "metadata.name", "operator": "In", "values": ["n1"]})).is_empty()
        );
        assert_eq!(
            fields(json!({"key": "metadata.uid", "operator": "Exists"})),
            [
                format!("{at}.operator: Invalid value: \"Exists\": not a valid selector operator"),
                format!(
                    "{at}.key: Invalid value: \"metadata.uid\": not a valid field selector key"
                ),
            ]
        );
        assert_eq!(
            fields(json!({"key": "metadata.name", "operator": "NotIn", "values": ["a", "b"]})),
            [format!("{at}.values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector")]
        );
        assert_eq!(
            fields(json!({"key": "metadata.name", "operator": "In", "values": ["N"]})).len(),
            1
        );
    }

    #[test]
    fn topology_spread_constraints_as_kubernetes_checks_them() {
        let errors =
            |constraints: Value| pods_errors(json!({"topologySpreadConstraints": constraints}));
        let zone = |extra: Value| {
            let mut c = json!({"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}});
            c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            c
        };
        assert!(errors(json!([
            zone(json!({})),
            zone(json!({"whenUnsatisfiable": "ScheduleAnyway"}))
        ]))
        .is_empty());
        let at = "spec.topologySpreadConstraints[0]";
        assert_eq!(
            errors(json!([zone(json!({"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Never"}))])),
            [
                format!("{at}.maxSkew: Invalid value: 0: must be greater than zero"),
                format!("{at}.topologyKey: Required value: can not be empty"),
                format!("{at}.whenUnsatisfiable: Unsupported value: \"Never\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\""),
            ]
        );
        assert_eq!(
            errors(json!([zone(json!({})), zone(json!({"maxSkew": 2}))])),
            [format!("{at}.{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{zone, DoNotSchedule}}\"")]
        );
        assert_eq!(
            errors(json!([zone(json!({"minDomains": 0, "whenUnsatisfiable": "ScheduleAnyway"}))])),
            [
                format!("{at}.minDomains: Invalid value: 0: must be greater than zero"),
                format!("{at}.minDomains: Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
            ]
        );
        assert_eq!(
            errors(json!([zone(json!({"nodeTaintsPolicy": "honor", "matchLabelKeys": ["app", "-x"]}))])),
            [
                format!("{at}.nodeTaintsPolicy: Unsupported value: \"honor\": supported values: \"Honor\", \"Ignore\""),
                format!("{at}.matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector"),
                format!("{at}.matchLabelKeys[1]: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
            ]
        );
        let mut unselected = zone(json!({"matchLabelKeys": ["version"]}));
        unselected.as_object_mut().unwrap().remove("labelSelector");
        assert_eq!(
            errors(json!([unselected])),
            [format!("{at}.matchLabelKeys: Forbidden: must not be specified when labelSelector is not set")]
        );
    }

    #[test]
    fn claim_selectors_and_external_traffic_policies_as_kubernetes_checks_them() {
        let claims = find("", "v1", "persistentvolumeclaims").unwrap();
        let claim = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "selector": {"matchExpressions": [{"key": "tier", "operator": "Foo"}]}}});
        assert_eq!(
            messages(&validate_object(claims, &claim)),
            ["spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator"]
        );
        let services = find("", "v1", "services").unwrap();
        let service = |kind: &str| {
            json!({"metadata": {"name": "s"}, "spec": {"type": kind,
            "ports": [{"port": 80}], "externalTrafficPolicy": "Local"}})
        };
        assert_eq!(
            messages(&validate_object(services, &service("ClusterIP"))),
            ["spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"]
        );
        assert!(validate_object(services, &service("NodePort")).is_empty());
    }
}

//! A container's environment: its `env` variables and where their values come from, and its
//! `envFrom` sources, as Kubernetes' `ValidateEnv` and `ValidateEnvFrom` check them.

use serde_json::Value;

use super::{
    config_key_errors, dns1123_subdomain_errors, validate_field_ref, FieldError, ENV_FIELD_PATHS,
};
use crate::model::quantity;

/// What a variable's `valueFrom.resourceFieldRef` may name (besides `requests.hugepages-*` and
/// `limits.hugepages-*`), sorted as Kubernetes lists them.
const RESOURCE_FIELDS: [&str; 6] = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

const ENV_NAME_MSG: &str = "a valid environment variable name must consist only of printable \
ASCII characters other than '='";

/// Kubernetes' relaxed `IsEnvVarName` (on by default since 1.32): printable ASCII but `=`.
fn env_name_is_valid(name: &str) -> bool {
    !name.contains('=') && name.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
}

/// The container's `env` and `envFrom`; `at` makes a path under the container.
pub(super) fn validate(c: &Value, at: &dyn Fn(&str) -> String, errors: &mut Vec<FieldError>) {
    let env = c.get("env").and_then(Value::as_array);
    for (j, var) in env.into_iter().flatten().enumerate() {
        let field = || at(&format!(".env[{j}].name"));
        match var.get("name").and_then(Value::as_str).unwrap_or("") {
            "" => errors.push(FieldError::required(field())),
            name if !env_name_is_valid(name) => {
                errors.push(FieldError::invalid(field(), name, ENV_NAME_MSG))
            }
            _ => {}
        }
        if let Some(from) = var.get("valueFrom").filter(|v| !v.is_null()) {
            let has_value = var.get("value").and_then(Value::as_str).is_some_and(|v| !v.is_empty());
            value_from(from, has_value, &|rest| at(&format!(".env[{j}].valueFrom{rest}")), errors);
        }
    }
    let sources = c.get("envFrom").and_then(Value::as_array);
    for (j, source) in sources.into_iter().flatten().enumerate() {
        let prefix = source.get("prefix").and_then(Value::as_str).unwrap_or("");
        if !prefix.is_empty() && !env_name_is_valid(prefix) {
            errors.push(FieldError::invalid(
                at(&format!(".envFrom[{j}].prefix")),
                prefix,
                ENV_NAME_MSG,
            ));
        }
        let mut given = 0;
        for kind in ["configMapRef", "secretRef"] {
            let Some(reference) = source.get(kind).filter(|r| !r.is_null()) else { continue };
            given += 1;
            let field = || at(&format!(".envFrom[{j}].{kind}.name"));
            match reference.get("name").and_then(Value::as_str).unwrap_or("") {
                "" => errors.push(FieldError::required(field())),
                name => {
                    for problem in dns1123_subdomain_errors(name) {
                        errors.push(FieldError::invalid(field(), name, problem));
                    }
                }
            }
        }
        // (Kubernetes names the list, not the item, for these two.)
        let message = match given {
            0 => "must specify one of: `configMapRef` or `secretRef`",
            1 => continue,
            _ => "may not have more than one field specified at a time",
        };
        errors.push(FieldError::invalid(at(".envFrom"), "", message));
    }
}

/// One variable's `valueFrom` (`validateEnvVarValueFrom`): each source given is checked, and
/// exactly one is given, without a `value` beside it.
fn value_from(
    from: &Value,
    has_value: bool,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let source = |kind: &str| from.get(kind).filter(|v| !v.is_null());
    let mut given = 0;
    if let Some(field_ref) = source("fieldRef") {
        given += 1;
        validate_field_ref(field_ref, &ENV_FIELD_PATHS, &|| at(".fieldRef"), errors);
    }
    if let Some(resource_ref) = source("resourceFieldRef") {
        given += 1;
        resource_field_ref(resource_ref, &|rest| at(&format!(".resourceFieldRef{rest}")), errors);
    }
    for kind in ["configMapKeyRef", "secretKeyRef"] {
        let Some(selector) = source(kind) else { continue };
        given += 1;
        let text = |field: &str| selector.get(field).and_then(Value::as_str).unwrap_or("");
        let name = text("name");
        for problem in dns1123_subdomain_errors(name) {
            errors.push(FieldError::invalid(at(&format!(".{kind}.name")), name, problem));
        }
        match text("key") {
            "" => errors.push(FieldError::required(at(&format!(".{kind}.key")))),
            key => {
                for problem in config_key_errors(key) {
                    errors.push(FieldError::invalid(at(&format!(".{kind}.key")), key, problem));
                }
            }
        }
    }
    let message = match given {
        0 => {
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or \
             `secretKeyRef`"
        }
        _ if has_value => "may not be specified when `value` is not empty",
        1 => return,
        _ => "may not have more than one field specified at a time",
    };
    errors.push(FieldError::invalid(at(""), "", message));
}

/// A variable's `resourceFieldRef` (`validateContainerResourceFieldSelector` and its divisor).
fn resource_field_ref(
    reference: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let resource = reference.get("resource").and_then(Value::as_str).unwrap_or("");
    let huge_pages =
        resource.starts_with("requests.hugepages-") || resource.starts_with("limits.hugepages-");
    if resource.is_empty() {
        errors.push(FieldError::required(at(".resource")));
    } else if !RESOURCE_FIELDS.contains(&resource) && !huge_pages {
        errors.push(FieldError::not_supported(at(".resource"), resource, &RESOURCE_FIELDS));
    }
    let divisor = match reference.get("divisor") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        _ => return,
    };
    if quantity::compare(&divisor, "0") == Some(std::cmp::Ordering::Equal) {
        return;
    }
    const BYTES: [&str; 13] =
        ["1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"];
    const BYTES_LISTED: &str = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei";
    let canonical = quantity::canonical(&divisor).ok().flatten().unwrap_or(divisor);
    let (allowed, listed, what): (&[&str], &str, &str) = match resource {
        "limits.cpu" | "requests.cpu" => (&["1m", "1"], "1m and 1", "the cpu resource"),
        "limits.memory" | "requests.memory" => (&BYTES, BYTES_LISTED, "the memory resource"),
        "limits.ephemeral-storage" | "requests.ephemeral-storage" => {
            (&BYTES, BYTES_LISTED, "the local ephemeral storage resource")
        }
        _ if huge_pages => (&BYTES, BYTES_LISTED, "the hugepages resource"),
        _ => return,
    };
    if !allowed.contains(&canonical.as_str()) {
        let message = format!("only divisor's values {listed} are supported with {what}");
        errors.push(FieldError::invalid(at(".divisor"), resource, message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors_of(container: Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate(&container, &|rest| format!("c{rest}"), &mut errors);
        errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    #[test]
    fn a_value_from_names_one_complete_source() {
        let container = json!({"env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"key": "k"}}},
            {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}},
            {"name": "D", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a/b"}}},
            {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "2"}}},
            {"name": "F", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "requests.hugepages-2Mi"}}},
        ]});
        let errors = errors_of(container);
        assert_eq!(errors[0], "c.env[0].valueFrom.configMapKeyRef.key: Required value");
        assert!(errors[1].starts_with(
            "c.env[1].valueFrom.secretKeyRef.name: Invalid value: \"\": a lowercase RFC 1123 subdomain"
        ));
        assert_eq!(
            errors[2],
            "c.env[2].valueFrom.resourceFieldRef.resource: Unsupported value: \"limits.gpu\": \
             supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \
             \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\""
        );
        assert!(errors[3].starts_with(
            "c.env[3].valueFrom.secretKeyRef.key: Invalid value: \"a/b\": a valid config key"
        ));
        assert_eq!(
            errors[4],
            "c.env[4].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.cpu\": only \
             divisor's values 1m and 1 are supported with the cpu resource"
        );
        assert_eq!(errors.len(), 5, "{errors:#?}");
    }

    #[test]
    fn an_env_from_source_names_one_config_map_or_secret() {
        let container = json!({"envFrom": [
            {},
            {"prefix": "X=", "configMapRef": {"name": "cm"}, "secretRef": {"name": "s"}},
            {"configMapRef": {}},
            {"prefix": "OK_", "secretRef": {"name": "s"}},
        ]});
        let errors = errors_of(container);
        assert_eq!(
            errors,
            [
                "c.envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`",
                "c.envFrom[1].prefix: Invalid value: \"X=\": a valid environment variable name \
                 must consist only of printable ASCII characters other than '='",
                "c.envFrom: Invalid value: \"\": may not have more than one field specified at a time",
                "c.envFrom[2].configMapRef.name: Required value",
            ]
        );
    }
}

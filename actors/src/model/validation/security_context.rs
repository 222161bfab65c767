//! The profile and mode fields of a pod's and a container's security context (seccomp,
//! AppArmor, `procMount`, `fsGroupChangePolicy`), as Kubernetes' `validateSeccompProfileField`,
//! `validateAppArmorProfileField`, `validateProcMountType` and `validateFSGroupChangePolicy`
//! check them.

use serde_json::Value;

use super::{local_path_errors, FieldError};

/// The seccomp and AppArmor profiles of a security context (a pod's or a container's); `at`
/// makes a path under the context.
pub(super) fn validate_profiles(
    context: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    const TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];
    if let Some(profile) = context.get("seccompProfile").filter(|p| p.is_object()) {
        let kind = profile.get("type").and_then(Value::as_str).unwrap_or("");
        let local = profile.get("localhostProfile").and_then(Value::as_str);
        match kind {
            "" => errors.push(FieldError::required_because(
                at("seccompProfile.type"),
                "type is required when seccompProfile is set",
            )),
            kind if !TYPES.contains(&kind) => {
                errors.push(FieldError::not_supported(at("seccompProfile.type"), kind, &TYPES))
            }
            _ => {}
        }
        match (kind, local) {
            ("Localhost", None) => errors.push(FieldError::required_because(
                at("seccompProfile.localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            ("Localhost", Some(path)) => {
                for problem in local_path_errors(path, false) {
                    let field = at("seccompProfile.localhostProfile");
                    errors.push(FieldError::invalid(field, path, problem));
                }
            }
            (_, Some(path)) => errors.push(FieldError::invalid(
                at("seccompProfile.localhostProfile"),
                path,
                "can only be set when seccomp type is Localhost",
            )),
            (_, None) => {}
        }
    }
    if let Some(profile) = context.get("appArmorProfile").filter(|p| p.is_object()) {
        let kind = profile.get("type").and_then(Value::as_str).unwrap_or("");
        let local = profile.get("localhostProfile").and_then(Value::as_str);
        let field = || at("appArmorProfile.localhostProfile");
        match (kind, local) {
            ("Localhost", Some(path)) if path.trim() != path => errors.push(FieldError::invalid(
                field(),
                path,
                "must not be padded with whitespace",
            )),
            ("Localhost", Some(path)) if path.len() > 4095 => {
                errors.push(FieldError::too_long(field(), 4095))
            }
            ("Localhost", Some(path)) if !path.is_empty() => {}
            ("Localhost", _) => errors.push(FieldError::required_because(
                field(),
                "must be set when AppArmor type is Localhost",
            )),
            ("RuntimeDefault" | "Unconfined", Some(path)) => errors.push(FieldError::invalid(
                field(),
                path,
                "can only be set when AppArmor type is Localhost",
            )),
            ("RuntimeDefault" | "Unconfined", None) => {}
            ("", _) => errors.push(FieldError::required_because(
                at("appArmorProfile.type"),
                "type is required when appArmorProfile is set",
            )),
            (kind, _) => {
                errors.push(FieldError::not_supported(at("appArmorProfile.type"), kind, &TYPES))
            }
        }
    }
}

/// A pod's `fsGroupChangePolicy`.
pub(super) fn validate_fs_group_change_policy(
    context: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let policy = context.get("fsGroupChangePolicy").and_then(Value::as_str);
    if let Some(policy) = policy.filter(|p| !matches!(*p, "OnRootMismatch" | "Always")) {
        let supported = ["Always", "OnRootMismatch"];
        errors.push(FieldError::not_supported(at("fsGroupChangePolicy"), policy, &supported));
    }
}

/// A container's `procMount`.
pub(super) fn validate_proc_mount(
    context: &Value,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let mount = context.get("procMount").and_then(Value::as_str);
    if let Some(mount) = mount.filter(|m| !matches!(*m, "Default" | "Unmasked")) {
        errors.push(FieldError::not_supported(at("procMount"), mount, &["Default", "Unmasked"]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors_of(context: Value) -> Vec<String> {
        let mut errors = Vec::new();
        let at = |rest: &str| format!("sc.{rest}");
        validate_profiles(&context, &at, &mut errors);
        validate_fs_group_change_policy(&context, &at, &mut errors);
        validate_proc_mount(&context, &at, &mut errors);
        errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    #[test]
    fn profiles_and_modes_take_known_values() {
        let context = json!({
            "seccompProfile": {"type": "Default"},
            "fsGroupChangePolicy": "Sometimes",
            "appArmorProfile": {"type": "Localhost"},
            "procMount": "Weird",
        });
        assert_eq!(
            errors_of(context),
            [
                "sc.seccompProfile.type: Unsupported value: \"Default\": supported values: \
                 \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
                "sc.appArmorProfile.localhostProfile: Required value: must be set when AppArmor \
                 type is Localhost",
                "sc.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \
                 \"Always\", \"OnRootMismatch\"",
                "sc.procMount: Unsupported value: \"Weird\": supported values: \"Default\", \
                 \"Unmasked\"",
            ]
        );
        let context =
            json!({"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "x"}});
        assert_eq!(
            errors_of(context),
            ["sc.seccompProfile.localhostProfile: Invalid value: \"x\": can only be set when \
              seccomp type is Localhost"]
        );
        let context = json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
            "appArmorProfile": {"type": "RuntimeDefault"}, "procMount": "Default"});
        assert!(errors_of(context).is_empty());
    }
}

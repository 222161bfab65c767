//! The PersistentVolumeClaimResize admission plugin: a claim may grow only once bound, and only
//! when the StorageClass that provisioned it allows expansion. kplane serves no StorageClasses
//! (nothing is provisioned dynamically), so, as in a Kubernetes cluster without an expandable
//! class, no claim grows.

use std::cmp::Ordering;

use serde_json::Value;

use super::ApiError;
use crate::model::{json, quantity, ResourceType};

/// Refuses an update of the claim `old` to `new` that asks for more storage.
pub(crate) fn admit(
    resource: &'static ResourceType,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let storage = |claim: &Value| {
        json::at(claim, "/spec/resources/requests/storage")
            .and_then(Value::as_str)
            .map(String::from)
    };
    let grows = match (storage(old), storage(new)) {
        (Some(old), Some(new)) => quantity::compare(&new, &old) == Some(Ordering::Greater),
        _ => false,
    };
    if !grows {
        return Ok(());
    }
    let message = if json::at(old, "/status/phase").and_then(Value::as_str) != Some("Bound") {
        "Only bound persistent volume claims can be expanded"
    } else {
        "only dynamically provisioned pvc can be resized and the storageclass that provisions \
         the pvc must support resize"
    };
    Err(ApiError::forbidden(resource, name, message.into(), Vec::new()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::resources;

    #[test]
    fn claims_do_not_grow_without_an_expandable_storage_class() {
        let claims = resources::core("persistentvolumeclaims");
        let claim = |size: &str, phase: &str| {
            json!({"spec": {"resources": {"requests": {"storage": size}}},
                "status": {"phase": phase}})
        };
        let refused = |old, new| admit(claims, "c", &old, &new).unwrap_err().to_string();
        assert!(refused(claim("1Gi", "Bound"), claim("2Gi", "Bound")).ends_with(
            "only dynamically provisioned pvc can be resized and the storageclass \
                        that provisions the pvc must support resize"
        ));
        assert!(refused(claim("1Gi", "Pending"), claim("2Gi", "Pending"))
            .ends_with("Only bound persistent volume claims can be expanded"));
        // The same size, written otherwise, is no growth.
        assert!(admit(claims, "c", &claim("1Gi", "Bound"), &claim("1024Mi", "Bound")).is_ok());
    }
}

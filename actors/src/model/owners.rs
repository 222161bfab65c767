//! An object's owner references as Kubernetes' API server takes them: an entry that repeats
//! an earlier one whole is dropped, and the client warned; entries that differ in any field
//! (a controller flag, a kind) are all kept.

use serde_json::{Map, Value};

use super::FastMap;

/// Drops the entries of `metadata.ownerReferences` that repeat an earlier one; returns the
/// uids of those dropped, in order (a uid once for each).
pub fn dedup(meta: &mut Map<String, Value>) -> Vec<String> {
    let Some(Value::Array(references)) = meta.get_mut("ownerReferences") else {
        return Vec::new();
    };
    let repeats = repeated(references);
    let dropped = repeats.iter().map(|&i| uid(&references[i])).collect();
    let mut index = 0;
    references.retain(|_| {
        index += 1;
        repeats.binary_search(&(index - 1)).is_err()
    });
    dropped
}

/// The positions of the entries of `references` that repeat an earlier one, in order. Only
/// entries of the same uid are compared whole, so that thousands of references take a pass.
fn repeated(references: &[Value]) -> Vec<usize> {
    let mut by_uid: FastMap<&str, Vec<usize>> = FastMap::default();
    let mut repeats = Vec::new();
    for (i, reference) in references.iter().enumerate() {
        let uid = reference.get("uid").and_then(Value::as_str).unwrap_or("");
        let earlier = by_uid.entry(uid).or_default();
        if earlier.iter().any(|&j| references[j] == *reference) {
            repeats.push(i);
        } else {
            earlier.push(i);
        }
    }
    repeats
}

fn uid(reference: &Value) -> String {
    reference.get("uid").and_then(Value::as_str).unwrap_or("").to_string()
}

/// The warning for an object whose owner references repeat (none when they do not), in the
/// API server's words for a create's or an update's body.
pub fn duplicates_warning(object: &Value) -> Option<String> {
    let references = object.get("metadata")?.get("ownerReferences")?.as_array()?;
    let dropped: Vec<String> = repeated(references).iter().map(|&i| uid(&references[i])).collect();
    (!dropped.is_empty()).then(|| warning(&dropped, false))
}

/// The API server's warning that owner references with the uids `dropped` were repeated: in a
/// request's body, or `after_admission` (a patch's result).
pub fn warning(dropped: &[String], after_admission: bool) -> String {
    let when = if after_admission { " after mutating admission happens" } else { "" };
    format!(
        ".metadata.ownerReferences contains duplicate entries{when}; API server dedups owner \
         references in 1.20+, and may reject such requests as early as 1.24; please fix your \
         requests; duplicate UID(s) observed: {}",
        dropped.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_whole_repeats_are_dropped() {
        let owner = json!({"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "u1"});
        let controller = json!({"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "u1",
            "controller": true});
        let object = json!({"metadata": {"ownerReferences": [owner, controller, owner, owner]}});
        let warning = duplicates_warning(&object).unwrap();
        assert!(warning.ends_with("duplicate UID(s) observed: u1, u1"), "{warning}");
        let mut meta = object["metadata"].as_object().unwrap().clone();
        assert_eq!(dedup(&mut meta), ["u1", "u1"]);
        assert_eq!(meta["ownerReferences"], json!([owner, controller]));
        assert_eq!(duplicates_warning(&json!({"metadata": {"ownerReferences": [owner]}})), None);
        assert_eq!(duplicates_warning(&json!({"metadata": {}})), None);
    }
}

//! Storage keys: `o/<group>/<plural>/<namespace>/<name>` for objects, one key for the revision.

use super::StoreError;
use crate::model::{resources, text, ObjectKey};

/// The key under which each shard records the highest revision it committed.
pub(crate) const REVISION_KEY: &[u8] = b"m/revision";

/// Appends `key`'s storage key to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, key: &ObjectKey) {
    for (i, part) in
        ["o", key.resource.group, key.resource.plural, &key.namespace, &key.name].iter().enumerate()
    {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(part.as_bytes());
    }
}

pub(crate) fn decode(bytes: &[u8]) -> Result<ObjectKey, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("bad key {:?}", String::from_utf8_lossy(bytes)));
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt())?;
    let mut parts = text.splitn(5, '/');
    let (Some("o"), Some(group), Some(plural), Some(namespace), Some(name)) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(corrupt());
    };
    let resource = resources::RESOURCES
        .iter()
        .find(|r| r.plural == plural && text::same(r.group, group))
        .ok_or_else(corrupt)?;
    Ok(ObjectKey::new(resource, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let encoded = |key: &ObjectKey| {
            let mut out = Vec::new();
            encode(&mut out, key);
            out
        };
        let key = ObjectKey::new(pods, "ns", "p.1");
        assert_eq!(encoded(&key), b"o//pods/ns/p.1");
        assert_eq!(decode(&encoded(&key)).unwrap(), key);
        let leases = resources::find("coordination.k8s.io", "v1", "leases").unwrap();
        let key = ObjectKey::new(leases, "kube-node-lease", "n");
        assert_eq!(decode(&encoded(&key)).unwrap(), key);
        assert!(decode(b"o/x").is_err());
    }
}

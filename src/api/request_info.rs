//! Parses a resource URL (`/api/v1/namespaces/ns/pods/x/status`) into what it addresses.

use kplane_actors::model::{resources, ResourceType};

use crate::error::HttpError;

/// What a resource URL addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: &'static ResourceType,
    /// The namespace in the path; `None` for cluster-scoped resources and all-namespace lists.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix was used.
    pub legacy_watch: bool,
}

/// Parses the segments after the group-version prefix (`/api/v1` or `/apis/g/v`).
pub fn parse(group: &str, version: &str, path: &str) -> Result<Target, HttpError> {
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let legacy_watch = segments.first() == Some(&"watch");
    if legacy_watch {
        segments.remove(0);
    }
    // `/api/v1/proxy/namespaces/{ns}/{plural}/{name}/{path}` (and `/api/v1/proxy/nodes/..`):
    // the older spelling of the proxy subresource, which the source documents use.
    if segments.first() == Some(&"proxy") && group.is_empty() {
        segments.remove(0);
        let at = if segments.first() == Some(&"namespaces") { 4 } else { 2 };
        if segments.len() < at {
            return Err(HttpError::NoSuchPath);
        }
        segments.insert(at, "proxy");
    }
    let find = |plural: &str| resources::find(group, version, plural).ok_or(HttpError::NoSuchPath);
    let owned = |s: &&str| s.to_string();
    let target = match segments.as_slice() {
        // `{name}/proxy/{path...}`: the proxy subresource carries a path of its own.
        ["namespaces", ns, plural, name, "proxy", ..]
            if find(plural).is_ok_and(|r| r.namespaced) =>
        {
            Target {
                resource: find(plural)?,
                namespace: Some(ns.to_string()),
                name: Some(name.to_string()),
                subresource: Some("proxy".into()),
                legacy_watch,
            }
        }
        [plural, name, "proxy", ..] if find(plural).is_ok_and(|r| !r.namespaced) => Target {
            resource: find(plural)?,
            namespace: None,
            name: Some(name.to_string()),
            subresource: Some("proxy".into()),
            legacy_watch,
        },
        // `/namespaces/{ns}/{resource}[/{name}[/{sub}]]` when the third segment names a
        // namespaced resource; otherwise it is the namespace object itself.
        ["namespaces", ns, plural, rest @ ..]
            if find(plural).is_ok_and(|r| r.namespaced) && rest.len() <= 2 =>
        {
            Target {
                resource: find(plural)?,
                namespace: Some(ns.to_string()),
                name: rest.first().map(owned),
                subresource: rest.get(1).map(owned),
                legacy_watch,
            }
        }
        [plural, rest @ ..] if rest.len() <= 2 => {
            let resource = find(plural)?;
            if resource.namespaced && !rest.is_empty() {
                return Err(HttpError::NoSuchPath);
            }
            Target {
                resource,
                namespace: None,
                name: rest.first().map(owned),
                subresource: rest.get(1).map(owned),
                legacy_watch,
            }
        }
        _ => return Err(HttpError::NoSuchPath),
    };
    if target.legacy_watch && target.subresource.as_deref() == Some("proxy") {
        return Err(HttpError::NoSuchPath);
    }
    if let Some(sub) = &target.subresource {
        if !target.resource.subresources.iter().any(|s| s.name == sub) {
            return Err(HttpError::NoSuchPath);
        }
    }
    if target.name.as_deref().is_some_and(|n| n.is_empty() || n == "." || n == "..") {
        return Err(HttpError::NoSuchPath);
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (plural, namespace, name, subresource, legacy watch)
    type Parsed = (String, Option<String>, Option<String>, Option<String>, bool);

    fn t(path: &str) -> Option<Parsed> {
        parse("", "v1", path).ok().map(|t| {
            (t.resource.plural.to_string(), t.namespace, t.name, t.subresource, t.legacy_watch)
        })
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn paths() {
        assert_eq!(t("pods"), Some(("pods".into(), None, None, None, false)));
        assert_eq!(t("namespaces/ns/pods"), Some(("pods".into(), s("ns"), None, None, false)));
        assert_eq!(
            t("namespaces/ns/pods/p/status"),
            Some(("pods".into(), s("ns"), s("p"), s("status"), false))
        );
        assert_eq!(t("namespaces"), Some(("namespaces".into(), None, None, None, false)));
        assert_eq!(t("namespaces/ns"), Some(("namespaces".into(), None, s("ns"), None, false)));
        assert_eq!(
            t("namespaces/ns/status"),
            Some(("namespaces".into(), None, s("ns"), s("status"), false))
        );
        assert_eq!(t("nodes/n1"), Some(("nodes".into(), None, s("n1"), None, false)));
        assert_eq!(t("watch/namespaces/ns/pods"), Some(("pods".into(), s("ns"), None, None, true)));
        let proxied = Some(("pods".into(), s("ns"), s("web:8080"), s("proxy"), false));
        assert_eq!(t("namespaces/ns/pods/web:8080/proxy/a/b"), proxied);
        assert_eq!(t("proxy/namespaces/ns/pods/web:8080/a/b"), proxied);
        assert_eq!(t("proxy/namespaces/ns/pods/web:8080"), proxied);
        let service = Some(("services".into(), s("ns"), s("web"), s("proxy"), false));
        assert_eq!(t("namespaces/ns/services/web/proxy/"), service);
        assert_eq!(t("proxy/namespaces/ns/services/web/demo/"), service);
        let node = Some(("nodes".into(), None, s("n1"), s("proxy"), false));
        assert_eq!(t("nodes/n1/proxy/metrics"), node);
        assert_eq!(t("nodes/n1/proxy"), node);
        assert_eq!(t("proxy/nodes/n1/metrics"), node);
        assert_eq!(t("namespaces/ns/configmaps/c/proxy/x"), None);
        assert_eq!(t("proxy/namespaces/ns/configmaps/c"), None);
        assert_eq!(t("proxy/namespaces/ns/pods"), None);
        assert_eq!(t("proxy/nodes"), None);
        assert_eq!(t("watch/proxy/nodes/n1/x"), None);
        assert_eq!(t("watch/namespaces/ns/pods/web/proxy/x"), None);
        assert_eq!(t("pods/p"), None);
        assert_eq!(t("widgets"), None);
        assert_eq!(t("namespaces/ns/pods/p/bogus"), None);
        assert_eq!(t("namespaces/ns/pods/p/status/x"), None);
        assert_eq!(t(""), None);
    }
}

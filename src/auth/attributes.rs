//! What a request asks, in the terms authorization and the audit log use (kube-apiserver's
//! RequestInfo): a resource request under `/api/v1` or `/apis/{group}/{version}` has a verb
//! (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`), an API
//! group, a namespace, a resource, a subresource and a name; anything else (discovery, health,
//! `/version`, `/openapi`, `/metrics`) is a non-resource request: its path and the lowercase
//! method as its verb.
//!
//! The path is read decoded, every `%XX` (`%2F` too), and by the handlers' own parser
//! (`api::request_info`), as the router and the handlers read it: authorization must judge the
//! request the handler serves, not another spelling of it.

use actix_web::http::Method;

/// A request's attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub resource_request: bool,
    pub path: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

impl Attributes {
    pub fn of(method: &Method, raw_path: &str, query: &str) -> Self {
        let path = percent_encoding::percent_decode_str(raw_path).decode_utf8_lossy();
        let mut attributes = Attributes { path: path.to_string(), ..Attributes::default() };
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let (group, version, rest) = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
            _ => {
                attributes.verb = method.as_str().to_ascii_lowercase();
                return attributes;
            }
        };
        attributes.resource_request = true;
        attributes.api_group = group.to_string();
        attributes.api_version = version.to_string();
        // As the handlers read the flag (a malformed one is their 400).
        let query = crate::api::Query::of(query).ok();
        let watch_flag = query.as_ref().is_some_and(|q| q.flag("watch"));
        let mut legacy_watch = false;
        let mut served = None;
        // Read by the handlers' own parser, so that what is judged is what they serve.
        match crate::api::parse_resource_path(group, version, &rest.join("/")) {
            Ok(target) => {
                legacy_watch = target.legacy_watch;
                served = Some(target.resource);
                attributes.resource = target.resource.plural.to_string();
                attributes.name = target.name.unwrap_or_default();
                attributes.subresource = target.subresource.unwrap_or_default();
                attributes.namespace = match target.namespace {
                    Some(namespace) => namespace,
                    // A namespace is in itself, as Kubernetes' RequestInfo has it.
                    None if group.is_empty() && attributes.resource == "namespaces" => {
                        attributes.name.clone()
                    }
                    None => String::new(),
                };
            }
            // Nothing the API serves (the handlers answer 404): judged as a request for the
            // path's first segment.
            Err(_) => attributes.resource = rest[0].to_string(),
        }
        let named = !attributes.name.is_empty();
        // `?watch=true` on one object's own path reads it (the handler serves a get), and is
        // judged as one; the old `/watch/` paths watch whatever they name.
        let watch = legacy_watch || (watch_flag && !named);
        attributes.verb = match *method {
            Method::GET | Method::HEAD if watch => "watch",
            Method::GET | Method::HEAD if named => "get",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if named => "delete",
            Method::DELETE => "deletecollection",
            _ => "",
        }
        .to_string();
        if attributes.verb.is_empty() {
            attributes.verb = method.as_str().to_ascii_lowercase();
        }
        // A list or watch of one object by `fieldSelector=metadata.name=X` is judged as one of
        // that object (a role's `resourceNames` allow it), as Kubernetes' RequestInfo reads it:
        // how `kubectl get NAME -w` and single-object informers watch.
        let listing = matches!(attributes.verb.as_str(), "list" | "watch");
        if let (false, true, Some(resource), Some(query)) = (named, listing, served, &query) {
            let selector = query.get("fieldSelector").unwrap_or("");
            let fields = kplane_actors::model::FieldSelector::parse(selector, resource).ok();
            let name = fields.as_ref().and_then(|f| f.required_value("metadata.name"));
            let segment = |n: &&str| !matches!(*n, "" | "." | "..") && !n.contains(['/', '%']);
            if let Some(name) = name.filter(segment) {
                attributes.name = name.to_string();
            }
        }
        // A WebSocket into a pod (`exec`, `attach`, `portforward`) is a GET, and Kubernetes
        // 1.32 authorizes it as `get` (its check of `create` too comes in 1.35); SPDY's POST
        // is a `create`. kubectl falls back to SPDY when the WebSocket is refused.
        attributes
    }

    /// `get`, `list` and `watch` read; everything else may write.
    pub fn read_only(&self) -> bool {
        matches!(self.verb.as_str(), "get" | "list" | "watch")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: Method, path: &str, query: &str) -> Attributes {
        Attributes::of(&method, path, query)
    }

    #[test]
    fn paths_read_as_kube_apiserver_reads_them() {
        let pods = of(Method::GET, "/api/v1/namespaces/default/pods", "limit=500");
        assert_eq!(
            (pods.verb.as_str(), pods.namespace.as_str(), pods.resource.as_str()),
            ("list", "default", "pods")
        );
        let log = of(Method::GET, "/api/v1/namespaces/default/pods/web/log", "");
        assert_eq!(
            (log.verb.as_str(), log.name.as_str(), log.subresource.as_str()),
            ("get", "web", "log")
        );
        let watch = of(Method::GET, "/api/v1/watch/namespaces/a/configmaps", "");
        assert_eq!((watch.verb.as_str(), watch.namespace.as_str()), ("watch", "a"));
        assert_eq!(of(Method::GET, "/api/v1/pods", "watch=true").verb, "watch");
        let one = of(Method::GET, "/api/v1/namespaces/a/configmaps/c", "watch=true");
        assert_eq!((one.verb.as_str(), one.name.as_str()), ("get", "c"));
        let legacy = of(Method::GET, "/api/v1/watch/namespaces/a/configmaps/c", "");
        assert_eq!((legacy.verb.as_str(), legacy.name.as_str()), ("watch", "c"));
        // One object by its name's field: judged as that object.
        let one = of(
            Method::GET,
            "/api/v1/namespaces/a/configmaps",
            "watch=1&fieldSelector=metadata.name%3Dkube-root-ca.crt",
        );
        assert_eq!((one.verb.as_str(), one.name.as_str()), ("watch", "kube-root-ca.crt"));
        let listed = of(
            Method::GET,
            "/api/v1/namespaces/a/pods",
            "fieldSelector=metadata.name==p,status.phase=Running",
        );
        assert_eq!((listed.verb.as_str(), listed.name.as_str()), ("list", "p"));
        let other = of(Method::GET, "/api/v1/namespaces/a/pods", "fieldSelector=metadata.name!=p");
        assert_eq!(other.name, "");
        let doomed =
            of(Method::DELETE, "/api/v1/namespaces/a/pods", "fieldSelector=metadata.name=p");
        assert_eq!((doomed.verb.as_str(), doomed.name.as_str()), ("deletecollection", ""));
        let namespace = of(Method::DELETE, "/api/v1/namespaces/team", "");
        assert_eq!(
            (
                namespace.verb.as_str(),
                namespace.resource.as_str(),
                namespace.name.as_str(),
                namespace.namespace.as_str()
            ),
            ("delete", "namespaces", "team", "team")
        );
        let finalize = of(Method::PUT, "/api/v1/namespaces/team/finalize", "");
        assert_eq!(
            (finalize.resource.as_str(), finalize.subresource.as_str()),
            ("namespaces", "finalize")
        );
        let lease =
            of(Method::POST, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "");
        assert_eq!(
            (lease.verb.as_str(), lease.api_group.as_str(), lease.resource.as_str()),
            ("create", "coordination.k8s.io", "leases")
        );
        assert_eq!(of(Method::DELETE, "/api/v1/namespaces/a/pods", "").verb, "deletecollection");
        // A WebSocket's GET is a `get`, SPDY's POST a `create`, as Kubernetes 1.32 has them.
        assert_eq!(of(Method::GET, "/api/v1/namespaces/a/pods/web/exec", "command=ls").verb, "get");
        assert_eq!(of(Method::POST, "/api/v1/namespaces/a/pods/web/exec", "").verb, "create");
        // Encoded slashes and letters are read as the handlers read them.
        let exec = of(Method::GET, "/api/v1/namespaces/team/pods/web%2Fexec", "command=sh");
        assert_eq!(
            (
                exec.resource.as_str(),
                exec.name.as_str(),
                exec.subresource.as_str(),
                exec.verb.as_str()
            ),
            ("pods", "web", "exec", "get")
        );
        let secrets = of(Method::GET, "/api/v1/namespaces/kube-system%2Fsecrets", "");
        assert_eq!(
            (secrets.resource.as_str(), secrets.namespace.as_str()),
            ("secrets", "kube-system")
        );
        assert!(of(Method::GET, "/%61pi/v1/namespaces/x/secrets", "").resource_request);
        assert_eq!(
            of(Method::GET, "/apis/rbac.authorization.k8s.io/v1%2Fclusterrolebindings", "")
                .resource,
            "clusterrolebindings"
        );
        assert_eq!(of(Method::GET, "/api/v1/pods", "watch=True").verb, "watch");
        let proxied = of(Method::GET, "/api/v1/proxy/namespaces/ns/pods/p/healthz", "");
        assert_eq!(
            (
                proxied.namespace.as_str(),
                proxied.resource.as_str(),
                proxied.name.as_str(),
                proxied.subresource.as_str()
            ),
            ("ns", "pods", "p", "proxy")
        );
        let node = of(Method::GET, "/api/v1/proxy/nodes/n1/metrics", "");
        assert_eq!(
            (node.resource.as_str(), node.name.as_str(), node.namespace.as_str()),
            ("nodes", "n1", "")
        );
        for discovery in ["/api", "/api/v1", "/apis/apps/v1", "/healthz", "/version"] {
            let attributes = of(Method::GET, discovery, "");
            assert!(!attributes.resource_request && attributes.verb == "get", "{discovery}");
        }
    }
}

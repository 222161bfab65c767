//! What a request asks, in the terms authorization and the audit log use (kube-apiserver's
//! RequestInfo): a resource request under `/api/v1` or `/apis/{group}/{version}` has a verb
//! (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`), an API
//! group, a namespace, a resource, a subresource and a name; anything else (discovery, health,
//! `/version`, `/openapi`, `/metrics`) is a non-resource request: its path and the lowercase
//! method as its verb.

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

/// Subresources of a namespace, not resources in it (`namespaces/{ns}/status`).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl Attributes {
    pub fn of(method: &Method, path: &str, query: &str) -> Self {
        let mut attributes = Attributes { path: path.to_string(), ..Attributes::default() };
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let rest = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => {
                attributes.api_version = version.to_string();
                rest
            }
            ["apis", group, version, rest @ ..] if !rest.is_empty() => {
                attributes.api_group = group.to_string();
                attributes.api_version = version.to_string();
                rest
            }
            _ => {
                attributes.verb = method.as_str().to_ascii_lowercase();
                return attributes;
            }
        };
        attributes.resource_request = true;
        let mut rest = rest.to_vec();
        let mut watch = query.split('&').any(|p| matches!(p, "watch=true" | "watch=1"));
        if rest.first() == Some(&"watch") {
            watch = true;
            rest.remove(0);
        }
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            attributes.namespace = rest[1].to_string();
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest.drain(..2);
            }
        }
        attributes.resource = rest.first().map_or(String::new(), |r| r.to_string());
        attributes.name = rest.get(1).map_or(String::new(), |n| n.to_string());
        attributes.subresource = rest.get(2).map_or(String::new(), |s| s.to_string());
        let named = !attributes.name.is_empty();
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
        // A WebSocket into a pod (a GET) starts a command or a stream there: Kubernetes 1.32
        // asks for `create` on it, as for the POST of SPDY.
        let into_pod = matches!(attributes.subresource.as_str(), "exec" | "attach" | "portforward");
        if attributes.resource == "pods" && into_pod {
            attributes.verb = "create".into();
        }
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
        assert_eq!(
            of(Method::GET, "/api/v1/namespaces/a/pods/web/exec", "command=ls").verb,
            "create"
        );
        for discovery in ["/api", "/api/v1", "/apis/apps/v1", "/healthz", "/version"] {
            let attributes = of(Method::GET, discovery, "");
            assert!(!attributes.resource_request && attributes.verb == "get", "{discovery}");
        }
    }
}

//! Discovery: `/version`, `/api`, `/apis`, the per-group-version resource lists, and health.

use actix_web::{web, HttpResponse};
use kplane_actors::model::{resources, ResourceType};
use serde_json::{json, Value};

use crate::error::HttpError;

/// The Kubernetes minor version whose API types kplane serves. kubectl's dispatcher runs the
/// kubectl build matching it.
pub const KUBERNETES_MINOR: &str = "32";

pub fn configure(cfg: &mut web::ServiceConfig) {
    // Each also with a trailing slash: the Python client asks for `/api/` and `/version/`.
    for path in ["/version", "/version/"] {
        cfg.route(path, web::get().to(version));
    }
    for path in ["/api", "/api/"] {
        cfg.route(path, web::get().to(api_versions));
    }
    // `/apis[/{group}[/{version}]]` and `/api/v1`: served under the resource scopes, which
    // hand these paths back here (see `objects::configure`).
    for path in ["/healthz", "/livez", "/readyz"] {
        cfg.route(path, web::get().to(ok));
        cfg.route(&format!("{path}/{{check:.*}}"), web::get().to(ok));
    }
}

fn json_response(value: Value) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(value.to_string())
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; charset=utf-8").body("ok")
}

/// The version `/version` and the OpenAPI documents report: the Kubernetes minor served, and
/// kplane's own version.
pub fn git_version() -> String {
    format!("v1.{KUBERNETES_MINOR}.0-kplane.{}", env!("CARGO_PKG_VERSION"))
}

async fn version() -> HttpResponse {
    json_response(json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": git_version(),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    }))
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

async fn api_versions() -> HttpResponse {
    json_response(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    }))
}

fn group_entry(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`: the group list.
pub fn api_groups() -> HttpResponse {
    let groups: Vec<Value> =
        resources::api_groups().into_iter().map(|(g, v)| group_entry(g, v)).collect();
    json_response(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// `/apis/{group}`: one group.
pub fn group(name: &str) -> Result<HttpResponse, HttpError> {
    let (g, v) = resources::api_groups()
        .into_iter()
        .find(|(g, _)| *g == name)
        .ok_or(HttpError::NoSuchPath)?;
    let mut entry = group_entry(g, v);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    Ok(json_response(entry))
}

/// `/api/v1`: the core group's resources.
pub fn core_resources() -> HttpResponse {
    json_response(resource_list("", "v1"))
}

/// `/apis/{group}/{version}`: one group version's resources.
pub fn group_resources(group: &str, version: &str) -> Result<HttpResponse, HttpError> {
    if !resources::api_groups().iter().any(|(g, v)| *g == group && *v == version) {
        return Err(HttpError::NoSuchPath);
    }
    Ok(json_response(resource_list(group, version)))
}

/// The APIResourceList of one group version, subresources as `parent/sub` entries.
fn resource_list(group: &str, version: &str) -> Value {
    let mut entries = Vec::new();
    for r in resources::in_group_version(group, version) {
        entries.push(resource_entry(r));
        for sub in r.subresources {
            let mut entry = json!({
                "name": format!("{}/{}", r.plural, sub.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": sub.kind,
                "verbs": sub.verbs,
            });
            if sub.group != group || sub.version != version {
                entry["group"] = json!(sub.group);
                entry["version"] = json!(sub.version);
            }
            entries.push(entry);
        }
    }
    let group_version =
        if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries})
}

fn resource_entry(r: &ResourceType) -> Value {
    let mut entry = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs(),
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if r.in_category_all {
        entry["categories"] = json!(["all"]);
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_short_names_categories_and_subresources() {
        let list = resource_list("", "v1");
        let find = |name: &str| {
            list["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).cloned()
        };
        let pods = find("pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert_eq!(find("pods/status").unwrap()["kind"], "Pod");
        assert_eq!(find("namespaces").unwrap()["namespaced"], false);
        assert!(find("leases").is_none());
        assert_eq!(resource_list("coordination.k8s.io", "v1")["resources"][0]["name"], "leases");
    }
}

//! Discovery: `/version`, `/api`, `/apis` (plain, or aggregated when `Accept` asks for it, as
//! kubectl does), the per-group-version resource lists, and health.

use actix_web::{web, HttpRequest, HttpResponse};
use kplane_actors::model::{resources, ResourceType};
use serde_json::{json, Value};

use super::media::{self, Conversion};
use super::AppState;
use crate::error::HttpError;
use crate::health::{self, HealthQuery};

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
    // Any method, as kube-apiserver's health handlers take them: a HEAD probe gets the
    // status without the body.
    for path in ["/healthz", "/livez", "/readyz"] {
        cfg.route(path, web::get().to(health));
        cfg.route(path, web::head().to(health));
        let check = format!("{path}/{{check}}");
        cfg.route(&check, web::get().to(one_check));
        cfg.route(&check, web::head().to(one_check));
    }
}

/// The checks behind `/healthz`, `/livez` and `/readyz`: the server answers (`ping`), its
/// logging is not blocked (`log`, which passes while the server answers: its log writes
/// never block, a failing one is dropped), and its store serves a read and commits (`etcd`,
/// as Kubernetes names the check of its storage): a shard that can no longer write to disk
/// fails it.
const CHECKS: [&str; 3] = ["ping", "log", "etcd"];

/// How long the store's shards may take to answer the `etcd` check.
const STORE_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs one named check: `Err` says why it failed.
async fn run_check(state: &AppState, name: &str) -> Result<(), String> {
    match name {
        "etcd" => {
            let namespaces = resources::core("namespaces");
            state.core.get(namespaces, "", "default").await.map_err(|e| e.to_string())?;
            let shards = state.core.check_store_shards(STORE_CHECK_TIMEOUT).await;
            shards.into_iter().collect()
        }
        _ => Ok(()),
    }
}

/// `/healthz` (`/livez`, `/readyz`): every check not excluded, as kube-apiserver answers.
async fn health(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let endpoint = req.path().trim_start_matches('/').trim_end_matches('/').to_string();
    let query = HealthQuery::of(req.query_string());
    let mut outcomes = Vec::new();
    for name in CHECKS {
        let skipped = query.excludes(name);
        outcomes.push((name, if skipped { None } else { Some(run_check(&state, name).await) }));
    }
    health::answer(&endpoint, &query, outcomes)
}

/// `/healthz/<check>`: that check alone; an unknown one is 404.
async fn one_check(check: web::Path<String>, state: web::Data<AppState>) -> HttpResponse {
    let name = check.into_inner();
    let known = CHECKS.contains(&name.as_str());
    health::answer_one(if known { Some(run_check(&state, &name).await) } else { None })
}

fn json_response(value: Value) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(value.to_string())
}

/// The version `/version` and the OpenAPI documents report: the Kubernetes minor served, and
/// kplane's own version.
pub fn git_version() -> String {
    format!("v1.{KUBERNETES_MINOR}.0-kplane.{}", env!("CARGO_PKG_VERSION"))
}

/// `/version`'s answer, its fields in the order of Kubernetes' `version.Info`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct VersionInfo {
    major: &'static str,
    minor: &'static str,
    git_version: String,
    git_commit: &'static str,
    git_tree_state: &'static str,
    build_date: &'static str,
    go_version: &'static str,
    compiler: &'static str,
    platform: String,
}

/// `/version`, indented as kube-apiserver always writes it (`WriteRawJSON`).
async fn version() -> HttpResponse {
    let info = VersionInfo {
        major: "1",
        minor: KUBERNETES_MINOR,
        git_version: git_version(),
        git_commit: "",
        git_tree_state: "clean",
        build_date: "1970-01-01T00:00:00Z",
        go_version: "rust",
        compiler: "rustc",
        platform: format!("{}/{}", std::env::consts::OS, go_arch()),
    };
    let body = serde_json::to_string_pretty(&info).unwrap_or_default();
    HttpResponse::Ok().content_type("application/json").body(body)
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `/api`: the core group's versions, or its aggregated discovery.
async fn api_versions(req: HttpRequest) -> HttpResponse {
    if let Some(version) = aggregated_asked(&req) {
        let core = json!({
            "metadata": {"creationTimestamp": null},
            "versions": [aggregated_version("", "v1")],
        });
        return aggregated_response(&req, version, vec![core]);
    }
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

/// `/apis`: the group list, or every group's aggregated discovery.
pub fn api_groups(req: &HttpRequest) -> HttpResponse {
    if let Some(version) = aggregated_asked(req) {
        let groups = resources::api_groups()
            .into_iter()
            .map(|(group, version)| {
                json!({
                    "metadata": {"name": group, "creationTimestamp": null},
                    "versions": [aggregated_version(group, version)],
                })
            })
            .collect();
        return aggregated_response(req, version, groups);
    }
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
    add_names(&mut entry, r);
    entry
}

/// A discovery entry's other names for `r`: its short names and categories, when it has any.
fn add_names(entry: &mut Value, r: &ResourceType) {
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if r.in_category_all {
        entry["categories"] = json!(["all"]);
    }
}

/// The version of aggregated discovery `Accept` asks for first, if any (kubectl asks for
/// `v2`, then `v2beta1`, then plain JSON).
fn aggregated_asked(req: &HttpRequest) -> Option<&'static str> {
    match media::conversion(req, false) {
        Conversion::Discovery(version) => Some(version),
        _ => None,
    }
}

/// An `APIGroupDiscoveryList` of `items`, in the content type that tells a client it is
/// aggregated (clients decide by the content type, not the body), as kube-apiserver serves
/// it: tagged with its hash (`ETag`, `Cache-Control: public`), 304 to a client that holds it.
fn aggregated_response(req: &HttpRequest, version: &str, items: Vec<Value>) -> HttpResponse {
    use sha2::Digest;
    let list = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    let body = list.to_string();
    let etag = format!("\"{}\"", hex::encode_upper(sha2::Sha256::digest(body.as_bytes())));
    let mut held = req.headers().get_all("if-none-match").filter_map(|h| h.to_str().ok());
    let unchanged = held.any(|held| held == etag);
    let mut answer = if unchanged { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    answer
        .insert_header(("ETag", etag))
        .insert_header(("Vary", "Accept"))
        .insert_header(("Cache-Control", "public"));
    if unchanged {
        return answer.finish();
    }
    answer
        .content_type(format!(
            "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        ))
        .body(body)
}

/// One group version's resources in aggregated form: each with its subresources nested, its
/// response kind and scope.
fn aggregated_version(group: &str, version: &str) -> Value {
    let kind_of = |group: &str, version: &str, kind: &str| json!({"group": group, "version": version, "kind": kind});
    let resources: Vec<Value> = resources::in_group_version(group, version)
        .map(|r| {
            let mut entry = json!({
                "resource": r.plural,
                "responseKind": kind_of(r.group, r.version, r.kind),
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular,
                "verbs": r.verbs(),
            });
            add_names(&mut entry, r);
            if !r.subresources.is_empty() {
                let subresources: Vec<Value> = r
                    .subresources
                    .iter()
                    .map(|sub| {
                        json!({
                            "subresource": sub.name,
                            "responseKind": kind_of(sub.group, sub.version, sub.kind),
                            "verbs": sub.verbs,
                        })
                    })
                    .collect();
                entry["subresources"] = json!(subresources);
            }
            entry
        })
        .collect();
    json!({"version": version, "resources": resources, "freshness": "Current"})
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

    /// Aggregated discovery is tagged with its hash, and a client holding it hears 304.
    #[test]
    fn aggregated_discovery_carries_an_etag() {
        use actix_web::test::TestRequest;
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let asked = || TestRequest::get().uri("/apis").insert_header(("Accept", accept));
        let first = api_groups(&asked().to_http_request());
        assert_eq!(first.status(), 200);
        assert_eq!(first.headers().get("cache-control").unwrap(), "public");
        let etag = first.headers().get("etag").unwrap().clone();
        let held = asked().insert_header(("If-None-Match", etag)).to_http_request();
        assert_eq!(api_groups(&held).status(), 304);
    }

    /// The aggregated form says what the plain list says, subresources nested under their
    /// resource (as client-go turns one into the other).
    #[test]
    fn aggregated_versions_say_what_the_resource_lists_say() {
        let mut groups = vec![("", "v1")];
        groups.extend(resources::api_groups());
        for (group, version) in groups {
            let aggregated = aggregated_version(group, version);
            let mut flattened = Vec::new();
            for r in aggregated["resources"].as_array().unwrap() {
                let kind = &r["responseKind"];
                let mut entry = json!({
                    "name": r["resource"],
                    "singularName": r["singularResource"],
                    "namespaced": r["scope"] == "Namespaced",
                    "kind": kind["kind"],
                    "verbs": r["verbs"],
                });
                for names in ["shortNames", "categories"] {
                    if let Some(value) = r.get(names) {
                        entry[names] = value.clone();
                    }
                }
                assert_eq!(
                    (kind["group"].as_str(), kind["version"].as_str()),
                    (Some(group), Some(version))
                );
                flattened.push(entry);
                for sub in r["subresources"].as_array().into_iter().flatten() {
                    let kind = &sub["responseKind"];
                    let mut entry = json!({
                        "name": format!("{}/{}", r["resource"].as_str().unwrap(), sub["subresource"].as_str().unwrap()),
                        "singularName": "",
                        "namespaced": r["scope"] == "Namespaced",
                        "kind": kind["kind"],
                        "verbs": sub["verbs"],
                    });
                    if kind["group"] != group || kind["version"] != version {
                        entry["group"] = kind["group"].clone();
                        entry["version"] = kind["version"].clone();
                    }
                    flattened.push(entry);
                }
            }
            assert_eq!(
                json!(flattened),
                resource_list(group, version)["resources"],
                "{group}/{version}"
            );
            assert_eq!(aggregated["freshness"], "Current");
        }
        let core = aggregated_version("", "v1");
        let rc = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "replicationcontrollers")
            .unwrap();
        let scale = rc["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(
            scale["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        let nodes = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "nodes")
            .unwrap();
        assert_eq!(
            (nodes["scope"].as_str(), nodes["shortNames"].clone()),
            (Some("Cluster"), json!(["no"]))
        );
    }
}

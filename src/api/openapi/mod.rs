//! OpenAPI publication and schema-driven field checks.
//!
//! This module owns:
//! * the OpenAPI v3 endpoints kubectl reads before `create -f`, `apply` and `explain`
//!   (`/openapi/v3` index and one OpenAPI 3.0 document per served group-version), plus
//!   `/openapi/v2`, the same schemas as Swagger 2.0 definitions (JSON or protobuf), which
//!   kubectl reads to validate the items of a `kind: List` file itself ([`v2`]);
//! * the component schemas, generated once from the `k8s-openapi` types through `schemars`
//!   (OpenAPI 3 settings, so references point at `#/components/schemas/...`), tagged with
//!   their group-version-kind;
//! * [`check_fields`], which walks a JSON object against its kind's schema as Kubernetes
//!   decodes a body into a built-in type: a value of the wrong JSON type (a number where a
//!   string goes, bad base64 in a secret) is refused, and fields the schema does not declare
//!   are found (the basis of `fieldValidation=Strict`) and dropped; it walks the schemas as
//!   compiled once by [`shapes`].
//!
//! Every document is built on first use and kept as serialized bytes for the process lifetime.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use k8s_openapi::api::authentication::v1 as authnv1;
use k8s_openapi::api::authorization::v1 as authzv1;
use k8s_openapi::api::discovery::v1 as discoveryv1;
use k8s_openapi::api::policy::v1 as policyv1;
use k8s_openapi::api::rbac::v1 as rbacv1;
use k8s_openapi::api::scheduling::v1 as schedulingv1;
use k8s_openapi::api::{coordination::v1 as coordv1, core::v1 as corev1, events::v1 as eventsv1};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use kplane_actors::model::lists;
use kplane_actors::model::resources::{self, ResourceType, RESOURCES};

use crate::error::HttpError;
use schemars::{generate::SchemaSettings, JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

mod enums;
mod omitted_zeros;
mod shapes;
mod v2;

use shapes::Shapes;
use v2::V2Document;

/// Prefix of every component reference.
const REF_PREFIX: &str = "#/components/schemas/";
/// Schema name of `meta/v1.Status`.
const STATUS_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// Schema name of `meta/v1.ListMeta`.
const LIST_META_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// Schema name of `meta/v1.Patch`.
const PATCH_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
/// Schema names of the `scale` and `binding` subresources' kinds.
const SCALE_SCHEMA: &str = "io.k8s.api.autoscaling.v1.Scale";
const BINDING_SCHEMA: &str = "io.k8s.api.core.v1.Binding";
/// Schema name of the `eviction` subresource's kind.
const EVICTION_SCHEMA: &str = "io.k8s.api.policy.v1.Eviction";
/// Schema name of the `token` subresource's kind.
const TOKEN_REQUEST_SCHEMA: &str = "io.k8s.api.authentication.v1.TokenRequest";
/// Schema name of `meta/v1.DeleteOptions`.
const DELETE_OPTIONS_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// The kinds of request bodies that are not resources, by group and kind, with their schemas:
/// [`check_fields`] knows them too.
const BODY_KINDS: [(&str, &str, &str); 5] = [
    ("meta.k8s.io", "DeleteOptions", DELETE_OPTIONS_SCHEMA),
    ("autoscaling", "Scale", SCALE_SCHEMA),
    ("", "Binding", BINDING_SCHEMA),
    ("policy", "Eviction", EVICTION_SCHEMA),
    ("authentication.k8s.io", "TokenRequest", TOKEN_REQUEST_SCHEMA),
];

/// Registers the OpenAPI routes: `/openapi/v3`, `/openapi/v3/api/v1`,
/// `/openapi/v3/apis/{group}/{version}` and `/openapi/v2`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/openapi/v3", web::get().to(index))
        .route("/openapi/v3/", web::get().to(index))
        .route("/openapi/v3/api/v1", web::get().to(core_document))
        .route("/openapi/v3/apis/{group}/{version}", web::get().to(group_document))
        .route("/openapi/v2", web::get().to(v2));
}

async fn index() -> HttpResponse {
    json_bytes(&DOCS.index)
}

async fn core_document(req: HttpRequest) -> Result<HttpResponse, HttpError> {
    document(&req, "", "v1")
}

async fn group_document(
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, HttpError> {
    let (group, version) = path.into_inner();
    if group.is_empty() {
        return Err(HttpError::NoSuchPath);
    }
    document(&req, &group, &version)
}

/// One group-version's document, as kube-openapi's v3 handler serves it: tagged with its hash
/// (`ETag`; 304 to a client that has it); asked for by the hash the index names, cacheable for
/// good (`public, immutable`, a year), so that kubectl reads it from its cache; asked for by
/// another hash, redirected (301) to the current one.
fn document(req: &HttpRequest, group: &str, version: &str) -> Result<HttpResponse, HttpError> {
    let doc = DOCS.documents.iter().find(|d| d.group == group && d.version == version);
    let doc = doc.ok_or(HttpError::NoSuchPath)?;
    let asked = web::Query::<HashMap<String, String>>::from_query(req.query_string())
        .ok()
        .and_then(|query| query.get("hash").cloned())
        .filter(|hash| !hash.is_empty());
    if asked.as_ref().is_some_and(|hash| *hash != doc.hash) {
        let location = format!("{}?hash={}", req.path(), doc.hash);
        return Ok(HttpResponse::MovedPermanently()
            .insert_header((header::LOCATION, location))
            .finish());
    }
    let etag = format!("\"{}\"", doc.hash);
    let held = req.headers().get(header::IF_NONE_MATCH).and_then(|h| h.to_str().ok());
    if held.is_some_and(|held| held.split(',').any(|tag| tag.trim() == etag)) {
        return Ok(HttpResponse::NotModified().insert_header((header::ETAG, etag)).finish());
    }
    let mut response = json_bytes(&doc.bytes);
    let headers = response.headers_mut();
    headers.insert(header::ETAG, header::HeaderValue::from_str(&etag).expect("hex"));
    if asked.is_some() {
        let expires = chrono::Utc::now() + chrono::Duration::days(365);
        let expires = expires.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        headers.insert(header::VARY, header::HeaderValue::from_static("Accept"));
        let immutable = header::HeaderValue::from_static("public, immutable");
        headers.insert(header::CACHE_CONTROL, immutable);
        if let Ok(expires) = header::HeaderValue::from_str(&expires) {
            headers.insert(header::EXPIRES, expires);
        }
    }
    Ok(response)
}

/// The v2 document: protobuf when the client asks for it (kubectl does), JSON otherwise.
async fn v2(req: HttpRequest) -> HttpResponse {
    let accept = req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or("");
    if accept.contains(V2_PROTOBUF) {
        let bytes = DOCS.v2.protobuf.clone();
        HttpResponse::Ok().content_type(V2_PROTOBUF_CONTENT_TYPE).body(bytes)
    } else {
        json_bytes(&DOCS.v2.json)
    }
}

/// The media type kubectl asks `/openapi/v2` for, and the one Kubernetes answers with.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const V2_PROTOBUF_CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn json_bytes(bytes: &Bytes) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(bytes.clone())
}

/// One served group-version's OpenAPI document.
struct GroupVersionDocument {
    group: &'static str,
    version: &'static str,
    bytes: Bytes,
    /// Its SHA-256, upper-case hex (the index's `hash`, the `ETag`).
    hash: String,
}

/// Everything built once: the per group-version documents, the index and the compiled schemas.
struct Docs {
    documents: Vec<GroupVersionDocument>,
    index: Bytes,
    /// The schemas compiled for the decode check.
    shapes: Shapes,
    v2: V2Document,
}

static DOCS: LazyLock<Docs> = LazyLock::new(build_docs);

/// Registers the schema of the k8s-openapi type for `(group, kind)` and returns its name.
fn register_kind(gen: &mut SchemaGenerator, group: &str, kind: &str) -> Option<String> {
    fn reg<T: JsonSchema>(gen: &mut SchemaGenerator) -> Option<String> {
        gen.subschema_for::<T>();
        Some(T::schema_name().into_owned())
    }
    match (group, kind) {
        ("", "ConfigMap") => reg::<corev1::ConfigMap>(gen),
        ("", "Endpoints") => reg::<corev1::Endpoints>(gen),
        ("", "Binding") => reg::<corev1::Binding>(gen),
        ("", "Event") => reg::<corev1::Event>(gen),
        ("", "LimitRange") => reg::<corev1::LimitRange>(gen),
        ("", "Namespace") => reg::<corev1::Namespace>(gen),
        ("", "Node") => reg::<corev1::Node>(gen),
        ("", "PersistentVolumeClaim") => reg::<corev1::PersistentVolumeClaim>(gen),
        ("", "PersistentVolume") => reg::<corev1::PersistentVolume>(gen),
        ("", "Pod") => reg::<corev1::Pod>(gen),
        ("", "ReplicationController") => reg::<corev1::ReplicationController>(gen),
        ("", "ResourceQuota") => reg::<corev1::ResourceQuota>(gen),
        ("", "Secret") => reg::<corev1::Secret>(gen),
        ("", "ServiceAccount") => reg::<corev1::ServiceAccount>(gen),
        ("", "PodTemplate") => reg::<corev1::PodTemplate>(gen),
        ("", "ComponentStatus") => reg::<corev1::ComponentStatus>(gen),
        ("", "Service") => reg::<corev1::Service>(gen),
        ("coordination.k8s.io", "Lease") => reg::<coordv1::Lease>(gen),
        ("discovery.k8s.io", "EndpointSlice") => reg::<discoveryv1::EndpointSlice>(gen),
        ("policy", "PodDisruptionBudget") => reg::<policyv1::PodDisruptionBudget>(gen),
        ("rbac.authorization.k8s.io", "Role") => reg::<rbacv1::Role>(gen),
        ("rbac.authorization.k8s.io", "ClusterRole") => reg::<rbacv1::ClusterRole>(gen),
        ("rbac.authorization.k8s.io", "RoleBinding") => reg::<rbacv1::RoleBinding>(gen),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            reg::<rbacv1::ClusterRoleBinding>(gen)
        }
        ("scheduling.k8s.io", "PriorityClass") => reg::<schedulingv1::PriorityClass>(gen),
        ("events.k8s.io", "Event") => reg::<eventsv1::Event>(gen),
        ("authentication.k8s.io", "SelfSubjectReview") => reg::<authnv1::SelfSubjectReview>(gen),
        ("authentication.k8s.io", "TokenReview") => reg::<authnv1::TokenReview>(gen),
        ("authorization.k8s.io", "LocalSubjectAccessReview") => {
            reg::<authzv1::LocalSubjectAccessReview>(gen)
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            reg::<authzv1::SelfSubjectAccessReview>(gen)
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            reg::<authzv1::SelfSubjectRulesReview>(gen)
        }
        ("authorization.k8s.io", "SubjectAccessReview") => reg::<authzv1::SubjectAccessReview>(gen),
        _ => None,
    }
}

fn build_docs() -> Docs {
    let mut gen = SchemaSettings::openapi3().into_generator();
    let mut kinds = HashMap::new();
    for rt in RESOURCES {
        if let Some(name) = register_kind(&mut gen, rt.group, rt.kind) {
            kinds.insert((rt.group.to_string(), rt.kind.to_string()), name);
        }
    }
    gen.subschema_for::<metav1::Status>();
    gen.subschema_for::<metav1::DeleteOptions>();
    gen.subschema_for::<metav1::Patch>();
    gen.subschema_for::<metav1::ListMeta>();
    gen.subschema_for::<k8s_openapi::api::autoscaling::v1::Scale>();
    gen.subschema_for::<corev1::Binding>();
    gen.subschema_for::<k8s_openapi::api::policy::v1::Eviction>();
    gen.subschema_for::<k8s_openapi::api::authentication::v1::TokenRequest>();
    let mut schemas = gen.take_definitions(true);
    declare_lists(&mut schemas);
    declare_enums(&mut schemas);
    metadata_is_optional(&mut schemas);

    // Tag kinds with their GVK and derive their List schemas from the item schema.
    for rt in RESOURCES {
        let Some(name) = kinds.get(&(rt.group.to_string(), rt.kind.to_string())).cloned() else {
            continue;
        };
        if let Some(Value::Object(schema)) = schemas.get_mut(&name) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(rt, rt.kind)]));
        }
        if rt.only_created() {
            continue; // never listed
        }
        let list_name = format!("{name}List");
        schemas.insert(list_name.clone(), list_schema(rt, &name));
        kinds.insert((rt.group.to_string(), rt.list_kind.to_string()), list_name);
    }

    let mut documents = Vec::new();
    let mut index_paths = Map::new();
    for (group, version) in std::iter::once(("", "v1")).chain(resources::api_groups()) {
        let doc = group_version_document(group, version, &schemas, &kinds);
        let bytes = serde_json::to_vec(&doc).unwrap_or_default();
        let hash = hex::encode_upper(Sha256::digest(&bytes));
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        index_paths.insert(
            key.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}") }),
        );
        documents.push(GroupVersionDocument { group, version, bytes: bytes.into(), hash });
    }
    let index = serde_json::to_vec(&json!({ "paths": index_paths })).unwrap_or_default().into();
    // The bodies of a DELETE and of the subresources that are no resource are checked
    // against their schemas too.
    let mut checked = kinds.clone();
    for (group, kind, schema) in BODY_KINDS {
        checked.insert((group.to_string(), kind.to_string()), schema.to_string());
    }
    let shapes = Shapes::compile(&schemas, &checked);
    let version = crate::api::discovery::git_version();
    let v2 = V2Document::build(&schemas, &version);
    Docs { documents, index, shapes, v2 }
}

/// Lists the values of the fields whose Go type is an enum, as Kubernetes' documents do (and
/// `kubectl explain` shows them): an `enum` on the property (on its items, for a list), and,
/// for a single value, "Possible enum values" with each value's meaning after its description.
fn declare_enums(schemas: &mut Map<String, Value>) {
    for (schema, field, items, values) in enums::ENUM_FIELDS {
        let property = schemas
            .get_mut(*schema)
            .and_then(|schema| schema.pointer_mut(&format!("/properties/{field}")))
            .and_then(Value::as_object_mut);
        let Some(property) = property else { continue };
        let listed: Vec<&str> = values.iter().map(|(value, _)| *value).collect();
        if *items {
            if let Some(Value::Object(item)) = property.get_mut("items") {
                item.insert("enum".into(), json!(listed));
            }
            continue;
        }
        property.insert("enum".into(), json!(listed));
        let mut description =
            property.get("description").and_then(Value::as_str).unwrap_or("").to_string();
        description.push_str("\n\nPossible enum values:");
        for (value, meaning) in values.iter() {
            description.push_str(&format!("\n - `{value:?}`"));
            if !meaning.is_empty() {
                description.push(' ');
                description.push_str(meaning);
            }
        }
        property.insert("description".into(), json!(description));
    }
}

/// `k8s-openapi` types hold their `metadata` as a plain field, so the derived schemas require
/// it; Kubernetes' documents do not (and `kubectl explain` marks required fields).
fn metadata_is_optional(schemas: &mut Map<String, Value>) {
    for schema in schemas.values_mut() {
        let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) else {
            continue;
        };
        required.retain(|field| field != "metadata");
        if required.is_empty() {
            schema.as_object_mut().map(|s| s.remove("required"));
        }
    }
}

/// Declares how the core types' lists merge, with the extensions Kubernetes' documents carry:
/// `kubectl apply` computes its strategic merge patch from them (without them it sends every
/// list it finds changed whole, and so replaces what others added to it).
fn declare_lists(schemas: &mut Map<String, Value>) {
    for declaring in lists::DECLARING_TYPES {
        let properties = schemas
            .get_mut(declaring.schema)
            .and_then(|schema| schema.get_mut("properties"))
            .and_then(Value::as_object_mut);
        let Some(properties) = properties else { continue };
        for list in declaring.lists {
            let Some(Value::Object(property)) = properties.get_mut(list.field) else { continue };
            property.insert("x-kubernetes-patch-strategy".into(), json!(list.strategy));
            match list.merge_key() {
                Some(key) => {
                    property.insert("x-kubernetes-patch-merge-key".into(), json!(key));
                    property.insert("x-kubernetes-list-type".into(), json!("map"));
                    property.insert("x-kubernetes-list-map-keys".into(), json!(list.keys));
                }
                None => {
                    property.insert("x-kubernetes-list-type".into(), json!("set"));
                }
            }
        }
    }
}

fn gvk(rt: &ResourceType, kind: &str) -> Value {
    json!({ "group": rt.group, "version": rt.version, "kind": kind })
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("{REF_PREFIX}{name}") })
}

/// The `<Kind>List` schema, built from the item schema's name (k8s-openapi has no schema for
/// its generic `List<T>`).
fn list_schema(rt: &ResourceType, item: &str) -> Value {
    json!({
        "description": format!("{} is a list of {} objects.", rt.list_kind, rt.kind),
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string"
            },
            "items": {
                "description": format!("List of {}.", rt.plural),
                "type": "array",
                "items": schema_ref(item)
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string"
            },
            "metadata": {
                "description": "Standard list metadata.",
                "allOf": [schema_ref(LIST_META_SCHEMA)]
            }
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [gvk(rt, rt.list_kind)]
    })
}

fn query_param(name: &str, ty: &str, description: &str) -> Value {
    let schema = json!({ "type": ty, "uniqueItems": true });
    json!({ "name": name, "in": "query", "description": description, "schema": schema })
}

fn path_param(name: &str) -> Value {
    json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string", "uniqueItems": true } })
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query_param("dryRun", "string", "When present, indicates that modifications should not be persisted."),
        query_param("fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes."),
        query_param(
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict.",
        ),
    ];
    if patch {
        params.push(query_param("force", "boolean", "Force is going to \"force\" Apply requests."));
    }
    params
}

fn list_params() -> Vec<Value> {
    vec![
        query_param("labelSelector", "string", "A selector to restrict the list of returned objects by their labels."),
        query_param("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields."),
        query_param("limit", "integer", "limit is a maximum number of responses to return for a list call."),
        query_param("continue", "string", "The continue option should be set when retrieving more results from the server."),
        query_param("resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
        query_param("resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
        query_param("timeoutSeconds", "integer", "Timeout for the list/watch call."),
        query_param("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
        query_param("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
    ]
}

fn response(code: &str, description: &str, schema: &str) -> (String, Value) {
    let content = json!({ "schema": schema_ref(schema) });
    (
        code.to_string(),
        json!({
            "description": description,
            "content": {
                "application/json": content.clone(),
                "application/yaml": content.clone(),
                "application/vnd.kubernetes.protobuf": content
            }
        }),
    )
}

fn body(schema: &str, content_types: &[&str]) -> Value {
    let mut content = Map::new();
    for ct in content_types {
        content.insert((*ct).to_string(), json!({ "schema": schema_ref(schema) }));
    }
    json!({ "content": content, "required": true })
}

/// Builds one operation object.
fn operation(
    action: &str,
    operation_id: String,
    description: String,
    gvk: &Value,
    parameters: Vec<Value>,
    request_body: Option<Value>,
    responses: Vec<(String, Value)>,
) -> Value {
    let mut op = Map::new();
    op.insert("description".into(), json!(description));
    op.insert("operationId".into(), json!(operation_id));
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    if let Some(b) = request_body {
        op.insert("requestBody".into(), b);
    }
    let mut resp = Map::new();
    for (code, r) in responses {
        resp.insert(code, r);
    }
    resp.insert("401".into(), json!({ "description": "Unauthorized" }));
    op.insert("responses".into(), Value::Object(resp));
    op.insert("x-kubernetes-action".into(), json!(action));
    op.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
    Value::Object(op)
}

/// `CoreV1` / `CoordinationV1` as used in upstream operation ids.
fn op_group_prefix(rt: &ResourceType) -> String {
    let group =
        if rt.group.is_empty() { "core" } else { rt.group.split('.').next().unwrap_or(rt.group) };
    let mut out = String::new();
    for word in [group, rt.version] {
        let mut chars = word.chars();
        if let Some(c) = chars.next() {
            out.extend(c.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

fn resource_paths(rt: &ResourceType, item: &str, list: &str, paths: &mut Map<String, Value>) {
    let prefix = if rt.group.is_empty() {
        format!("/api/{}", rt.version)
    } else {
        format!("/apis/{}/{}", rt.group, rt.version)
    };
    let collection = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
    } else {
        format!("{prefix}/{}", rt.plural)
    };
    let item_path = format!("{collection}/{{name}}");
    let g = gvk(rt, rt.kind);
    let gp = op_group_prefix(rt);
    let ns = if rt.namespaced { "Namespaced" } else { "" };
    let kind = rt.kind;
    let mut scope_params = Vec::new();
    if rt.namespaced {
        scope_params.push(path_param("namespace"));
    }
    let mut item_params = scope_params.clone();
    item_params.insert(0, path_param("name"));
    let body_types =
        ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
    let patch_types = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ];

    let create = operation(
        "post",
        format!("create{gp}{ns}{kind}"),
        format!("create a {kind}"),
        &g,
        write_params(false),
        Some(body(item, &body_types)),
        vec![
            response("200", "OK", item),
            response("201", "Created", item),
            response("202", "Accepted", item),
        ],
    );
    if rt.only_created() {
        let mut coll = Map::new();
        coll.insert("post".into(), create);
        coll.insert("parameters".into(), Value::Array(scope_params));
        paths.insert(collection, Value::Object(coll));
        return;
    }

    // Collection: list and create.
    let mut coll = Map::new();
    coll.insert(
        "get".into(),
        operation(
            "list",
            format!("list{gp}{ns}{kind}"),
            format!("list or watch objects of kind {kind}"),
            &g,
            list_params(),
            None,
            vec![response("200", "OK", list)],
        ),
    );
    if rt.only_read() {
        // Read only: list the collection, get an item.
        coll.insert("parameters".into(), Value::Array(scope_params));
        paths.insert(collection, Value::Object(coll));
        let mut read = Map::new();
        read.insert(
            "get".into(),
            operation(
                "get",
                format!("read{gp}{ns}{kind}"),
                format!("read the specified {kind}"),
                &g,
                vec![],
                None,
                vec![response("200", "OK", item)],
            ),
        );
        read.insert("parameters".into(), Value::Array(item_params));
        paths.insert(item_path, Value::Object(read));
        return;
    }
    coll.insert("post".into(), create);
    if rt.serves("deletecollection") {
        coll.insert(
            "delete".into(),
            operation(
                "deletecollection",
                format!("deleteCollection{gp}{ns}{kind}"),
                format!("delete collection of {kind}"),
                &g,
                list_params(),
                None,
                vec![response("200", "OK", STATUS_SCHEMA)],
            ),
        );
    }
    coll.insert("parameters".into(), Value::Array(scope_params.clone()));
    paths.insert(collection.clone(), Value::Object(coll));

    if rt.namespaced {
        let mut all = Map::new();
        all.insert(
            "get".into(),
            operation(
                "list",
                format!("list{gp}{kind}ForAllNamespaces"),
                format!("list or watch objects of kind {kind}"),
                &g,
                list_params(),
                None,
                vec![response("200", "OK", list)],
            ),
        );
        paths.insert(format!("{prefix}/{}", rt.plural), Value::Object(all));
    }

    // Item: read, replace, delete, patch.
    let item_ops = |suffix: &str, what: &str, item: &str, g: &Value| {
        let mut m = Map::new();
        m.insert(
            "get".into(),
            operation(
                "get",
                format!("read{gp}{ns}{kind}{suffix}"),
                format!("read {what} of the specified {kind}"),
                g,
                vec![],
                None,
                vec![response("200", "OK", item)],
            ),
        );
        m.insert(
            "put".into(),
            operation(
                "put",
                format!("replace{gp}{ns}{kind}{suffix}"),
                format!("replace {what} of the specified {kind}"),
                g,
                write_params(false),
                Some(body(item, &body_types)),
                vec![response("200", "OK", item), response("201", "Created", item)],
            ),
        );
        m.insert(
            "patch".into(),
            operation(
                "patch",
                format!("patch{gp}{ns}{kind}{suffix}"),
                format!("partially update {what} of the specified {kind}"),
                g,
                write_params(true),
                Some(body(PATCH_SCHEMA, &patch_types)),
                vec![response("200", "OK", item), response("201", "Created", item)],
            ),
        );
        m.insert("parameters".into(), Value::Array(item_params.clone()));
        m
    };
    let mut main = item_ops("", "the object", item, &g);
    // What a delete answers (see `objects::delete_response`).
    let deleted = if rt.returns_deleted_object() { item } else { STATUS_SCHEMA };
    main.insert(
        "delete".into(),
        operation(
            "delete",
            format!("delete{gp}{ns}{kind}"),
            format!("delete a {kind}"),
            &g,
            vec![
                query_param("dryRun", "string", "When present, indicates that modifications should not be persisted."),
                query_param("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted."),
                query_param("propagationPolicy", "string", "Whether and how garbage collection will be performed."),
            ],
            Some(json!({ "content": { "application/json": { "schema": schema_ref(DELETE_OPTIONS_SCHEMA) } } })),
            vec![response("200", "OK", deleted), response("202", "Accepted", deleted)],
        ),
    );
    paths.insert(item_path.clone(), Value::Object(main));

    for sub in rt.subresources {
        let path = format!("{item_path}/{}", sub.name);
        match sub.name {
            "status" => {
                paths.insert(path, Value::Object(item_ops("Status", "status", item, &g)));
            }
            "scale" => {
                let scale_gvk =
                    json!({"group": sub.group, "version": sub.version, "kind": sub.kind});
                let ops = item_ops("Scale", "scale", SCALE_SCHEMA, &scale_gvk);
                paths.insert(path, Value::Object(ops));
            }
            "binding" => {
                let binding_gvk = json!({"group": "", "version": "v1", "kind": "Binding"});
                let mut m = Map::new();
                m.insert(
                    "post".into(),
                    operation(
                        "post",
                        format!("create{gp}{ns}{kind}Binding"),
                        format!("create binding of a {kind}"),
                        &binding_gvk,
                        write_params(false),
                        Some(body(BINDING_SCHEMA, &body_types)),
                        vec![response("201", "Created", BINDING_SCHEMA)],
                    ),
                );
                m.insert("parameters".into(), Value::Array(item_params.clone()));
                paths.insert(path, Value::Object(m));
            }
            "log" => {
                let mut get = Map::new();
                get.insert("operationId".into(), json!(format!("read{gp}{ns}{kind}Log")));
                get.insert(
                    "description".into(),
                    json!(format!("read log of the specified {kind}")),
                );
                get.insert("x-kubernetes-action".into(), json!("get"));
                get.insert("x-kubernetes-group-version-kind".into(), g.clone());
                let log_params: Vec<Value> = [
                    ("container", "string", "The container for which to stream logs."),
                    ("follow", "boolean", "Follow the log stream of the pod."),
                    ("limitBytes", "integer", "The number of bytes to read from the server before terminating the log output."),
                    ("previous", "boolean", "Return previous terminated container logs."),
                    ("tailLines", "integer", "The number of lines from the end of the logs to show."),
                ]
                .iter()
                .map(|(n, t, d)| query_param(n, t, d))
                .collect();
                get.insert("parameters".into(), Value::Array(log_params));
                get.insert(
                    "responses".into(),
                    json!({"200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}}),
                );
                let mut m = Map::new();
                m.insert("get".into(), Value::Object(get));
                m.insert("parameters".into(), Value::Array(item_params.clone()));
                paths.insert(path, Value::Object(m));
            }
            _ => {}
        }
    }
}

/// Collects every schema name reachable from `value` through `$ref`s into `out`.
fn collect_refs(value: &Value, schemas: &Map<String, Value>, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix(REF_PREFIX)) {
                        if out.insert(name.to_string()) {
                            if let Some(target) = schemas.get(name) {
                                collect_refs(target, schemas, out);
                            }
                        }
                    }
                } else {
                    collect_refs(v, schemas, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, schemas, out)),
        _ => {}
    }
}

fn group_version_document(
    group: &str,
    version: &str,
    schemas: &Map<String, Value>,
    kinds: &HashMap<(String, String), String>,
) -> Value {
    let mut paths = Map::new();
    for rt in resources::in_group_version(group, version) {
        let Some(item) = kinds.get(&(rt.group.to_string(), rt.kind.to_string())) else {
            continue;
        };
        // A review has no list (and no path that would name one).
        let list = match kinds.get(&(rt.group.to_string(), rt.list_kind.to_string())) {
            Some(list) => list,
            None if rt.only_created() => item,
            None => continue,
        };
        resource_paths(rt, item, list, &mut paths);
    }
    let mut used = BTreeSet::new();
    collect_refs(&Value::Object(paths.clone()), schemas, &mut used);
    let mut components = Map::new();
    for name in used {
        if let Some(s) = schemas.get(&name) {
            components.insert(name, s.clone());
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.32.0" },
        "paths": paths,
        "components": { "schemas": components }
    })
}

/// The fields of the struct with schema `name` whose zero (`false`, `0`, `""`) Go leaves out of
/// the JSON it writes: those that are not pointers, of a scalar type, tagged `omitempty`
/// (`hostNetwork`, `nodeName`; not `replicas` or `automountServiceAccountToken`, pointers whose
/// zero is a value, nor `restartCount`, written even when zero). Empty for any other schema.
pub fn omitted_zeros(name: &str) -> &'static [&'static str] {
    let table = omitted_zeros::OMITTED_ZEROS;
    table.binary_search_by(|(struct_name, _)| struct_name.cmp(&name)).map_or(&[], |i| table[i].1)
}

/// What to do with declared fields that Go's `omitempty` leaves out (`null`, empty optional
/// lists and maps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Empty {
    /// Leave them out, as a decoded object is stored.
    Omit,
    /// Keep them: a server-side apply configuration, whose fields the applier owns even empty.
    Keep,
}

/// What to do with the fields a schema does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// Only report them.
    Report,
    /// Report and remove them.
    Drop,
}

/// Checks `object` as Kubernetes decodes it into the Go type of `kind` in `group` (empty for
/// core). A value the type does not take is an error, worded as Go's decoder words it
/// (`json: cannot unmarshal number into Go struct field ConfigMap.data of type string`);
/// `null` is taken everywhere. Otherwise returns the paths (`.spec.containers[0].foo`,
/// `.spec.bogus`) of the fields the schema does not declare, and with [`Unknown::Drop`]
/// removes them. Map values (`additionalProperties`), int-or-string, quantities,
/// `x-kubernetes-preserve-unknown-fields` and untyped schemas take any field. Declared fields
/// that Go's `omitempty` would leave out once decoded are removed ([`Empty::Omit`]). An
/// unknown kind is not checked.
pub fn check_fields(
    group: &str,
    kind: &str,
    object: &mut Value,
    unknown: Unknown,
) -> Result<Vec<String>, String> {
    check_fields_as(group, kind, object, unknown, Empty::Omit)
}

/// As [`check_fields`], with what to do with empty fields (a server-side apply's
/// configuration keeps them).
pub fn check_fields_as(
    group: &str,
    kind: &str,
    object: &mut Value,
    unknown: Unknown,
    empty: Empty,
) -> Result<Vec<String>, String> {
    DOCS.shapes.check(group, kind, object, unknown, empty)
}

/// The API core's check of a patched or applied object: drops the fields of `object` its
/// kind's schema does not declare (answering their paths) and what `omitempty` leaves out,
/// and refuses a value its type does not take (the decoder's message).
pub fn check_patched(group: &str, kind: &str, object: &mut Value) -> Result<Vec<String>, String> {
    check_fields(group, kind, object, Unknown::Drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{test as atest, App};

    fn document(key: &str) -> Value {
        let doc = DOCS
            .documents
            .iter()
            .find(|d| {
                if key == "api/v1" {
                    d.group.is_empty()
                } else {
                    format!("apis/{}/{}", d.group, d.version) == key
                }
            })
            .expect("document exists");
        serde_json::from_slice(&doc.bytes).expect("valid json")
    }

    fn all_refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(m) => {
                for (k, v) in m {
                    if k == "$ref" {
                        out.push(v.as_str().unwrap_or_default().to_string());
                    } else {
                        all_refs(v, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| all_refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn lists_declare_how_they_merge() {
        let doc = document("api/v1");
        let schemas = &doc["components"]["schemas"];
        for declaring in lists::DECLARING_TYPES {
            for list in declaring.lists {
                let property = &schemas[declaring.schema]["properties"][list.field];
                assert_eq!(
                    property["x-kubernetes-patch-strategy"], list.strategy,
                    "{}.{}",
                    declaring.schema, list.field
                );
            }
        }
        let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        let ports = &schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "port");
        assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["port", "protocol"]));
        let finalizers =
            &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"];
        assert_eq!(finalizers["x-kubernetes-list-type"], "set");
        assert!(finalizers.get("x-kubernetes-patch-merge-key").is_none());
        let tolerations = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["tolerations"];
        assert!(tolerations.get("x-kubernetes-patch-strategy").is_none());
    }

    #[test]
    fn metadata_is_never_required() {
        let doc = document("api/v1");
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for (name, schema) in schemas {
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            assert!(!required.contains(&json!("metadata")), "{name}");
        }
        assert_eq!(schemas["io.k8s.api.core.v1.Container"]["required"], json!(["name"]));
    }

    #[test]
    fn enum_fields_list_their_values_as_kubernetes_documents_do() {
        let doc = document("api/v1");
        let schemas = &doc["components"]["schemas"];
        let restart = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["restartPolicy"];
        assert_eq!(restart["enum"], json!(["Always", "Never", "OnFailure"]));
        let described = restart["description"].as_str().unwrap();
        assert!(
            described.ends_with(
                "#restart-policy\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n - \
                 `\"OnFailure\"`"
            ),
            "{described}"
        );
        let pull = &schemas["io.k8s.api.core.v1.Container"]["properties"]["imagePullPolicy"];
        assert!(pull["description"].as_str().unwrap().contains(
            "\n - `\"IfNotPresent\"` means that kubelet pulls if the image isn't present on disk."
        ));
        // A list's values are its items'; its description stays as it is.
        let modes =
            &schemas["io.k8s.api.core.v1.PersistentVolumeClaimSpec"]["properties"]["accessModes"];
        let expected =
            json!(["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]);
        assert_eq!(modes["items"]["enum"], expected);
        assert!(!modes["description"].as_str().unwrap().contains("Possible enum values"));
    }

    #[test]
    fn subresources_are_described() {
        let doc = document("api/v1");
        let paths = &doc["paths"];
        let scale = &paths["/api/v1/namespaces/{namespace}/replicationcontrollers/{name}/scale"];
        assert_eq!(scale["get"]["x-kubernetes-group-version-kind"]["kind"], "Scale");
        assert!(scale["patch"].is_object() && scale["put"].is_object());
        let binding = &paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"];
        assert_eq!(binding["post"]["x-kubernetes-group-version-kind"]["kind"], "Binding");
        let log = &paths["/api/v1/namespaces/{namespace}/pods/{name}/log"];
        assert!(log["get"]["parameters"].as_array().is_some_and(|p| p.len() == 5));
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.autoscaling.v1.Scale"));
    }

    #[test]
    fn every_ref_resolves_in_each_document() {
        for key in ["api/v1", "apis/coordination.k8s.io/v1"] {
            let doc = document(key);
            let schemas = doc["components"]["schemas"].as_object().expect("schemas");
            let mut refs = Vec::new();
            all_refs(&doc, &mut refs);
            assert!(!refs.is_empty());
            for r in refs {
                let name = r.strip_prefix(REF_PREFIX).unwrap_or_else(|| panic!("bad ref {r}"));
                assert!(schemas.contains_key(name), "{key}: unresolved {r}");
            }
        }
    }

    #[test]
    fn kinds_have_gvk_lists_and_descriptions() {
        let doc = document("api/v1");
        let pod = &doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group":"","version":"v1","kind":"Pod"}])
        );
        assert!(pod["description"].as_str().unwrap().starts_with("Pod is"));
        let meta = &pod["properties"]["metadata"];
        let mut refs = Vec::new();
        all_refs(meta, &mut refs);
        assert_eq!(
            refs,
            vec!["#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
        );
        let list = &doc["components"]["schemas"]["io.k8s.api.core.v1.PodList"];
        assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "PodList");
        let probe = &doc["components"]["schemas"]["io.k8s.api.core.v1.Container"]["properties"]
            ["livenessProbe"];
        assert!(probe["description"].is_string());
        let lease = document("apis/coordination.k8s.io/v1");
        assert_eq!(
            lease["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"]
                ["x-kubernetes-group-version-kind"],
            json!([{"group":"coordination.k8s.io","version":"v1","kind":"Lease"}])
        );
    }

    #[test]
    fn patch_operations_declare_field_validation() {
        let doc = document("api/v1");
        for (path, kind) in [
            ("/api/v1/namespaces/{namespace}/pods/{name}", "Pod"),
            ("/api/v1/nodes/{name}", "Node"),
            ("/api/v1/namespaces/{name}", "Namespace"),
            ("/api/v1/namespaces/{namespace}/pods/{name}/status", "Pod"),
        ] {
            let patch = &doc["paths"][path]["patch"];
            assert_eq!(
                patch["x-kubernetes-group-version-kind"],
                json!({"group":"","version":"v1","kind":kind}),
                "{path}"
            );
            assert_eq!(patch["x-kubernetes-action"], "patch");
            let names: Vec<&str> = patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["name"].as_str())
                .collect();
            for n in ["fieldValidation", "fieldManager", "dryRun"] {
                assert!(names.contains(&n), "{path} lacks {n}");
            }
        }
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["post"].is_object());
        let lease = document("apis/coordination.k8s.io/v1");
        assert!(lease["paths"]
            ["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"]
            .is_object());
    }

    #[actix_web::test]
    async fn routes_serve_index_documents_and_404s() {
        let app = atest::init_service(App::new().configure(configure)).await;
        let resp =
            atest::call_service(&app, atest::TestRequest::get().uri("/openapi/v3").to_request())
                .await;
        assert_eq!(resp.status(), 200);
        let index: Value = atest::read_body_json(resp).await;
        let url = index["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="));
        assert!(index["paths"]["apis/coordination.k8s.io/v1"].is_object());

        let resp =
            atest::call_service(&app, atest::TestRequest::get().uri(&url).to_request()).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers().get("content-type").unwrap(), "application/json");
        let body = atest::read_body(resp).await;
        let hash = hex::encode_upper(Sha256::digest(&body));
        assert!(url.ends_with(&hash));

        let resp = atest::call_service(
            &app,
            atest::TestRequest::get()
                .uri("/openapi/v3/apis/coordination.k8s.io/v1?hash=x")
                .to_request(),
        )
        .await;
        assert_eq!(resp.status(), 301, "a stale hash is sent to the current one");
        let location = resp.headers().get("location").unwrap().to_str().unwrap().to_string();
        assert!(location.starts_with("/openapi/v3/apis/coordination.k8s.io/v1?hash="));
        let resp =
            atest::call_service(&app, atest::TestRequest::get().uri(&location).to_request()).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers().get("cache-control").unwrap(), "public, immutable");
        let etag = resp.headers().get("etag").unwrap().clone();
        let held = atest::TestRequest::get()
            .uri("/openapi/v3/apis/coordination.k8s.io/v1")
            .insert_header(("If-None-Match", etag))
            .to_request();
        assert_eq!(atest::call_service(&app, held).await.status(), 304);

        let resp = atest::call_service(
            &app,
            atest::TestRequest::get().uri("/openapi/v3/apis/apps/v1").to_request(),
        )
        .await;
        assert_eq!(resp.status(), 404);
        let status: Value = atest::read_body_json(resp).await;
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 404);

        // v2: JSON unless protobuf is asked for, with every kind's definition tagged.
        let resp =
            atest::call_service(&app, atest::TestRequest::get().uri("/openapi/v2").to_request())
                .await;
        assert_eq!(resp.status(), 200);
        let v2: Value = atest::read_body_json(resp).await;
        let pod = &v2["definitions"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        assert_eq!(pod["properties"]["spec"]["$ref"], "#/definitions/io.k8s.api.core.v1.PodSpec");
        let request = atest::TestRequest::get()
            .uri("/openapi/v2")
            .insert_header(("accept", format!("{V2_PROTOBUF}, application/json")))
            .to_request();
        let resp = atest::call_service(&app, request).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers().get("content-type").unwrap(), V2_PROTOBUF_CONTENT_TYPE);
        assert_eq!(atest::read_body(resp).await, DOCS.v2.protobuf);
    }

    #[test]
    fn unknown_fields_found_in_nested_container() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "image": "nginx"}, {"name": "d", "image": "x", "foo": 1}],
                "bogus": true
            }
        });
        let mut found = check_fields("", "Pod", &mut pod.clone(), Unknown::Report).unwrap();
        found.sort();
        assert_eq!(found, vec![".spec.bogus".to_string(), ".spec.containers[1].foo".to_string()]);
    }

    #[test]
    fn zeros_of_scalars_that_are_not_pointers_in_go_are_left_out() {
        let table = omitted_zeros::OMITTED_ZEROS;
        assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "sorted, for the binary search");
        let mut pod = json!({
            "metadata": {"name": "p", "namespace": "", "generation": 0},
            "spec": {
                "hostNetwork": false, "nodeName": "", "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0, "priority": 0,
                "containers": [{"name": "c", "image": "i", "tty": false, "stdin": true,
                    "ports": [{"containerPort": 0, "hostPort": 0, "name": ""}],
                    "readinessProbe": {"initialDelaySeconds": 0, "periodSeconds": 5},
                    "securityContext": {"runAsUser": 0, "privileged": false}}],
                "volumes": [{"name": "v", "configMap": {"name": "", "defaultMode": 0}}]
            },
            "status": {"containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
                "image": "", "imageID": "", "containerID": ""}]}
        });
        check_fields("", "Pod", &mut pod, Unknown::Drop).unwrap();
        assert_eq!(
            pod,
            json!({
                "metadata": {"name": "p"},
                "spec": {
                    "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 0,
                    "priority": 0,
                    "containers": [{"name": "c", "image": "i", "stdin": true,
                        "ports": [{"containerPort": 0}],
                        "readinessProbe": {"periodSeconds": 5},
                        "securityContext": {"runAsUser": 0, "privileged": false}}],
                    "volumes": [{"name": "v", "configMap": {"defaultMode": 0}}]
                },
                "status": {"containerStatuses": [{"name": "c", "ready": false,
                    "restartCount": 0, "image": "", "imageID": ""}]}
            })
        );
        // A zero of the wrong type is still refused, and a server-side apply's configuration
        // keeps its zeros (the applier owns them).
        let mut pod = json!({"spec": {"hostNetwork": 0}});
        assert!(check_fields("", "Pod", &mut pod, Unknown::Drop).is_err());
        let mut config = json!({"spec": {"hostNetwork": false}});
        check_fields_as("", "Pod", &mut config, Unknown::Drop, Empty::Keep).unwrap();
        assert_eq!(config, json!({"spec": {"hostNetwork": false}}));
    }

    #[test]
    fn nulls_and_empty_optional_lists_and_maps_are_left_out_as_go_encodes_them() {
        let mut pod = json!({
            "metadata": {"name": "p", "annotations": null, "labels": {}, "finalizers": []},
            "spec": {
                "containers": [{"name": "c", "image": "i", "args": [], "env": null,
                    "command": [], "resources": {}, "securityContext": {}}],
                "nodeSelector": {}, "tolerations": [], "hostname": null, "volumes": null,
                "securityContext": {}
            }
        });
        for unknown in [Unknown::Report, Unknown::Drop] {
            assert_eq!(check_fields("", "Pod", &mut pod, unknown).unwrap(), Vec::<String>::new());
        }
        assert_eq!(
            pod,
            json!({
                "metadata": {"name": "p"},
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": {},
                        "securityContext": {}}],
                    "securityContext": {}
                }
            })
        );
        // A required list stays, empty, for validation to refuse; empty map values and list
        // items are not fields and stay as they are.
        let mut pod = json!({"spec": {"containers": []}});
        check_fields("", "Pod", &mut pod, Unknown::Drop).unwrap();
        assert_eq!(pod, json!({"spec": {"containers": []}}));
        let mut rc = json!({"spec": {"template": {"metadata": {"creationTimestamp": null,
            "deletionTimestamp": null}}}});
        check_fields("", "ReplicationController", &mut rc, Unknown::Drop).unwrap();
        assert_eq!(rc["spec"]["template"]["metadata"], json!({"creationTimestamp": null}));
        let mut claim = json!({"spec": {"dataSource": {"apiGroup": null, "kind": "K", "name": "n"},
            "accessModes": []}});
        check_fields("", "PersistentVolumeClaim", &mut claim, Unknown::Drop).unwrap();
        assert_eq!(
            claim,
            json!({"spec": {"dataSource": {"apiGroup": null, "kind": "K", "name": "n"}}})
        );
        let mut cm = json!({"data": {"a": ""}, "binaryData": {}});
        check_fields("", "ConfigMap", &mut cm, Unknown::Drop).unwrap();
        assert_eq!(cm, json!({"data": {"a": ""}}));
        // A null in a map or a list decodes as Go decodes it: into its type's zero value.
        let mut cm = json!({"metadata": {"labels": {"l": null}, "annotations": {"a": null},
            "finalizers": ["x/y", null]}, "data": {"k": null}, "binaryData": {"b": null}});
        check_fields("", "ConfigMap", &mut cm, Unknown::Drop).unwrap();
        let zeroed = json!({"metadata": {"labels": {"l": ""}, "annotations": {"a": ""},
            "finalizers": ["x/y", ""]}, "data": {"k": ""}, "binaryData": {"b": ""}});
        assert_eq!(cm, zeroed);
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"cpu": null}}}], "tolerations": [null],
            "overhead": {"memory": null}}});
        check_fields("", "Pod", &mut pod, Unknown::Drop).unwrap();
        assert_eq!(pod["spec"]["tolerations"], json!([{}]));
        assert_eq!(pod["spec"]["overhead"], json!({"memory": "0"}));
        assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"], json!({"cpu": "0"}));
        // A server-side apply's configuration keeps them: there a null removes the field.
        let mut config = json!({"metadata": {"labels": {"l": null}}});
        check_fields_as("", "ConfigMap", &mut config, Unknown::Drop, Empty::Keep).unwrap();
        assert_eq!(config, json!({"metadata": {"labels": {"l": null}}}));
    }

    #[test]
    fn required_scalars_a_write_leaves_out_are_written_as_their_zero_as_go_writes_them_back() {
        let mut pod = json!({"spec": {"containers": [{"image": "i"}]}, "status": {
            "conditions": [{"type": "example.com/gate", "status": null}],
            "containerStatuses": [{"name": "c", "state": {"terminated": {}}}]}});
        check_fields("", "Pod", &mut pod, Unknown::Drop).unwrap();
        assert_eq!(pod["spec"]["containers"][0], json!({"name": "", "image": "i"}));
        assert_eq!(
            pod["status"]["conditions"][0],
            json!({"type": "example.com/gate", "status": ""})
        );
        let status = &pod["status"]["containerStatuses"][0];
        let expected = json!({"name": "c", "ready": false, "restartCount": 0, "image": "",
            "imageID": "", "state": {"terminated": {"exitCode": 0}}});
        assert_eq!(status, &expected);
        // Required lists, maps, structs, times and int-or-strings are not filled in.
        let mut ns = json!({"status": {"conditions": [{"type": "T"}]}});
        check_fields("", "Namespace", &mut ns, Unknown::Drop).unwrap();
        assert_eq!(ns["status"]["conditions"][0], json!({"type": "T", "status": ""}));
        let mut pdb = json!({"status": {"conditions": [{"type": "T", "status": "True"}]}});
        check_fields("policy", "PodDisruptionBudget", &mut pdb, Unknown::Drop).unwrap();
        let condition = json!({"type": "T", "status": "True", "reason": "", "message": ""});
        assert_eq!(pdb["status"]["conditions"][0], condition);
        // Nor in a server-side apply's configuration, whose fields are only those it names.
        let mut config = json!({"status": {"conditions": [{"type": "T"}]}});
        check_fields_as("", "Pod", &mut config, Unknown::Drop, Empty::Keep).unwrap();
        assert_eq!(config, json!({"status": {"conditions": [{"type": "T"}]}}));
    }

    /// The decoder's message for `object` as a `kind` (core group), or `None` if it decodes.
    fn decode_error(kind: &str, object: Value) -> Option<String> {
        check_fields("", kind, &mut object.clone(), Unknown::Report).err()
    }

    #[test]
    fn quantities_and_times_are_kept_as_kubernetes_writes_them_back() {
        let mut pod = json!({"metadata": {"name": "p",
                "creationTimestamp": "2026-01-01T01:00:00.75+01:00"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                "requests": {"cpu": "0.5", "memory": "1024Mi", "ephemeral-storage": 1000},
                "limits": {"cpu": "100m", "memory": " 64Mi"}}}],
                "overhead": {"cpu": 0.25}},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "lastProbeTime": null}]}});
        check_fields("", "Pod", &mut pod, Unknown::Report).unwrap();
        let resources = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(
            resources,
            &json!({"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1k"},
                "limits": {"cpu": "100m", "memory": "64Mi"}})
        );
        assert_eq!(pod["spec"]["overhead"]["cpu"], "250m");
        assert_eq!(pod["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(pod["status"]["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        let mut quota = json!({"spec": {"hard": {"pods": "1e1", "requests.storage": "1.5Gi"}}});
        check_fields("", "ResourceQuota", &mut quota, Unknown::Report).unwrap();
        assert_eq!(quota["spec"]["hard"], json!({"pods": "10", "requests.storage": "1536Mi"}));

        let mut lease = json!({"spec": {"renewTime": "2026-01-01T01:00:00.1234567+01:00",
            "acquireTime": "2026-01-01T00:00:00Z"}});
        check_fields("coordination.k8s.io", "Lease", &mut lease, Unknown::Report).unwrap();
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:00.123456Z");
        assert_eq!(lease["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z");
        let mut event = json!({"eventTime": null, "firstTimestamp": "2026-01-01T00:00:00.9Z"});
        check_fields("", "Event", &mut event, Unknown::Report).unwrap();
        assert_eq!(event, json!({"eventTime": null, "firstTimestamp": "2026-01-01T00:00:00Z"}));

        for (hard, message) in [
            ("abc", "quantities must match the regular expression"),
            ("1mi", "unable to parse quantity's suffix"),
        ] {
            let mut quota = json!({"spec": {"hard": {"cpu": hard}}});
            let error = check_fields("", "ResourceQuota", &mut quota, Unknown::Report);
            assert!(error.as_ref().is_err_and(|e| e.starts_with(message)), "{hard}: {error:?}");
        }
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_as_go_decodes() {
        let port = |port: Value| json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": port}]}]}});
        let int32 =
            "Go struct field ContainerPort.spec.containers.ports.containerPort of type int32";
        for (value, json) in [(json!("80"), "string"), (json!(1.5), "number 1.5")] {
            let expected = format!("json: cannot unmarshal {json} into {int32}");
            assert_eq!(decode_error("Pod", port(value)), Some(expected));
        }
        assert_eq!(
            decode_error("Pod", port(json!(1u64 << 31))).map(|e| e.contains("int32")),
            Some(true)
        );
        assert_eq!(decode_error("Pod", port(json!(80))), None);
        assert_eq!(decode_error("Pod", port(Value::Null)), None);
        assert_eq!(
            decode_error("Pod", json!({"spec": {"containers": {"name": "c"}}})).unwrap(),
            "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
        assert_eq!(
            decode_error("Pod", json!({"metadata": {"labels": {"a": 1}}})).unwrap(),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        );
        assert_eq!(
            decode_error("Pod", json!({"spec": {"hostNetwork": "yes"}})).unwrap(),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool"
        );
        assert_eq!(
            decode_error("ConfigMap", json!({"data": ["a"]})).unwrap(),
            "json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"
        );
        // Types with decoders of their own: base64 bytes, times, int-or-string, quantities.
        let secret = |data: Value| json!({"data": {"k": data}});
        assert_eq!(decode_error("Secret", secret(json!("aGk="))), None);
        assert_eq!(decode_error("Secret", secret(json!("aG\nk="))), None);
        assert_eq!(
            decode_error("Secret", secret(json!("aGk"))).unwrap(),
            "illegal base64 data at input byte 3"
        );
        assert_eq!(
            decode_error("Secret", secret(json!(12))).unwrap(),
            "json: cannot unmarshal number into Go struct field Secret.data of type []uint8"
        );
        let time = |at: Value| json!({"metadata": {"name": "e"}, "lastTimestamp": at});
        assert_eq!(decode_error("Event", time(json!("2024-01-01T00:00:00Z"))), None);
        assert!(decode_error("Event", time(json!("noon")))
            .unwrap()
            .starts_with("parsing time \"noon\""));
        // Only Go's layout: a `T` between date and time, and `Z` for UTC.
        assert_eq!(
            decode_error("Event", time(json!("2024-01-01 00:00:00Z"))).unwrap(),
            "parsing time \"2024-01-01 00:00:00Z\" as \"2006-01-02T15:04:05Z07:00\": \
             cannot parse \" 00:00:00Z\" as \"T\""
        );
        assert!(decode_error("Event", time(json!("2024-01-01T00:00:00z"))).is_some());
        assert_eq!(
            decode_error("Event", time(json!(12))).unwrap(),
            "json: cannot unmarshal number into Go value of type string"
        );
        let probe = |port: Value| json!({"spec": {"containers": [{"name": "c", "readinessProbe": {"tcpSocket": {"port": port}}}]}});
        assert_eq!(decode_error("Pod", probe(json!("http"))), None);
        assert_eq!(decode_error("Pod", probe(json!(8080))), None);
        assert_eq!(
            decode_error("Pod", probe(json!(true))).unwrap(),
            "json: cannot unmarshal bool into Go value of type int32"
        );
        let limits = |cpu: Value| json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}]}});
        assert_eq!(decode_error("Pod", limits(json!(0.5))), None);
        assert_eq!(decode_error("Pod", limits(json!("500m"))), None);
        assert!(decode_error("Pod", limits(json!({})))
            .unwrap()
            .starts_with("quantities must match"));
        // Untyped parts take anything.
        let fields = json!({"metadata": {"managedFields": [{"fieldsV1": {"f:data": {}}}]}});
        assert_eq!(decode_error("ConfigMap", fields), None);
    }

    #[test]
    fn unknown_fields_no_false_positives() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "default",
                "labels": {"app": "web", "example.com/tier": "front"},
                "annotations": {"a.b/c": "d"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": "1", "controller": true}]
            },
            "spec": {
                "restartPolicy": "Always",
                "nodeSelector": {"disk": "ssd"},
                "volumes": [{"name": "v", "emptyDir": {}}, {"name": "cm", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "p"}]}}],
                "containers": [{
                    "name": "c", "image": "nginx",
                    "command": ["sh"], "args": ["-c", "sleep 1"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
                    "resources": {"limits": {"cpu": "500m", "memory": 128}, "requests": {"cpu": 1}},
                    "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "initialDelaySeconds": 3},
                    "readinessProbe": {"tcpSocket": {"port": 80}},
                    "volumeMounts": [{"name": "v", "mountPath": "/data"}],
                    "securityContext": {"runAsUser": 1000, "capabilities": {"add": ["NET_ADMIN"]}}
                }],
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
            },
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
        });
        assert_eq!(
            check_fields("", "Pod", &mut pod.clone(), Unknown::Report).unwrap(),
            Vec::<String>::new()
        );

        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8081}]}});
        assert_eq!(
            check_fields("", "Service", &mut svc.clone(), Unknown::Report).unwrap(),
            Vec::<String>::new()
        );

        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"any.key": "v", "other": "w"}, "binaryData": {"b": "aGk="}});
        assert_eq!(
            check_fields("", "ConfigMap", &mut cm.clone(), Unknown::Report).unwrap(),
            Vec::<String>::new()
        );
        let bad_cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "nope": 1}, "dat": {}});
        let mut found =
            check_fields("", "ConfigMap", &mut bad_cm.clone(), Unknown::Report).unwrap();
        found.sort();
        assert_eq!(found, vec![".dat".to_string(), ".metadata.nope".to_string()]);
        let mut pruned = bad_cm.clone();
        check_fields("", "ConfigMap", &mut pruned, Unknown::Drop).unwrap();
        assert_eq!(
            pruned,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        );

        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "h", "leaseDurationSeconds": 10, "renewTime": "2024-01-01T00:00:00.000000Z"}});
        assert_eq!(
            check_fields("coordination.k8s.io", "Lease", &mut lease.clone(), Unknown::Report)
                .unwrap(),
            Vec::<String>::new()
        );

        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {},
            "items": [{"metadata": {"name": "a"}, "data": {"x": "y"}, "zzz": 1}]});
        assert_eq!(
            check_fields("", "ConfigMapList", &mut list.clone(), Unknown::Report).unwrap(),
            vec![".items[0].zzz".to_string()]
        );
        assert!(check_fields("", "NoSuchKind", &mut list.clone(), Unknown::Report)
            .unwrap()
            .is_empty());
    }
}

//! The resource endpoints: get, list, create, update, delete and deletecollection, for every
//! served resource and its status subresource.

use std::sync::Arc;

use actix_web::http::{Method, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::{BufMut, BytesMut};
use kplane_actors::core::WriteOptions;
use kplane_actors::core::{unknown_field_message, ApiCore, ApiError, ObjectList, PatchType};
use kplane_actors::model::{resources, FieldError, ResourceType, StoredObject};
use serde_json::{json, Value};

use super::body;
use super::list_items;
use super::media::{self, Conversion};
use super::params::Query;
use super::partial;
use super::request_info::{self, Target};
use super::table::{self, IncludeObject};
use super::AppState;
use crate::auth::escalation::Escalation;
use crate::auth::filter::RequestUser;
use crate::error::{HttpError, PATCH_MEDIA_TYPES};

/// `/api/v1/...` and `/apis/...` as two prefix scopes, which match without regular expressions
/// (most requests are for resources, and a pattern route costs a regex match per request);
/// the discovery documents at their roots are handed to `discovery`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::scope("/api/v1").default_service(web::to(core_group)));
    cfg.service(web::scope("/apis").default_service(web::to(named_group)));
}

/// The path after the scope's prefix, percent-decoded.
fn tail(req: &HttpRequest) -> Result<String, HttpError> {
    let raw = req.match_info().unprocessed();
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|t| t.into_owned())
        .map_err(|_| HttpError::NoSuchPath)
}

fn discovery_only(req: &HttpRequest) -> Result<(), HttpError> {
    if req.method() == Method::GET {
        Ok(())
    } else {
        Err(HttpError::NoSuchPath)
    }
}

async fn core_group(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, HttpError> {
    let tail = tail(&req)?;
    if tail.trim_matches('/').is_empty() {
        discovery_only(&req)?;
        return Ok(super::discovery::core_resources());
    }
    let target = request_info::parse("", "v1", &tail)?;
    dispatch(req, target, payload, state).await
}

async fn named_group(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, HttpError> {
    let tail = tail(&req)?;
    let mut parts = tail.trim_start_matches('/').splitn(3, '/');
    let (group, version, rest) = (parts.next(), parts.next(), parts.next());
    match (group.filter(|g| !g.is_empty()), version.filter(|v| !v.is_empty()), rest) {
        (None, _, _) => {
            discovery_only(&req)?;
            Ok(super::discovery::api_groups(&req))
        }
        (Some(group), None, _) => {
            discovery_only(&req)?;
            super::discovery::group(group)
        }
        (Some(group), Some(version), rest)
            if rest.is_none_or(|r| r.trim_matches('/').is_empty()) =>
        {
            discovery_only(&req)?;
            super::discovery::group_resources(group, version)
        }
        (Some(group), Some(version), rest) => {
            let target = request_info::parse(group, version, rest.unwrap_or(""))?;
            dispatch(req, target, payload, state).await
        }
    }
}

async fn dispatch(
    req: HttpRequest,
    target: Target,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, HttpError> {
    let query = Query::parse(&req)?;
    let core = &state.core;
    let resource = target.resource;
    let namespace = target.namespace.as_deref().unwrap_or("");
    let status_only = target.subresource.as_deref() == Some("status");
    let method = req.method().clone();
    if target.legacy_watch {
        // The `/watch/` paths only watch, as in Kubernetes: a write there is 405.
        if method != Method::GET {
            return Err(HttpError::MethodNotAllowed);
        }
        if target.subresource.is_some() {
            return Err(HttpError::NoSuchPath);
        }
    }
    if resource.is_metrics() {
        return super::resource_metrics::serve(&req, &state, &target, &query).await;
    }
    if resource.is_component_status() {
        return super::component_status::serve(&req, &method, &state, &target, &query).await;
    }
    match (target.subresource.as_deref(), target.name.as_deref()) {
        (Some("binding"), Some(name)) => {
            return binding(&req, payload, namespace, Some(name), &query, &state).await
        }
        (Some("eviction"), Some(name)) if resource.plural == "pods" => {
            return eviction(&req, payload, namespace, name, &query, &state).await
        }
        (Some("log"), Some(name)) if method == Method::GET => {
            return super::logs::serve(&req, &state, namespace, name, &query).await
        }
        (Some("scale"), Some(name)) => {
            return scale(&req, payload, namespace, name, &query, &state).await
        }
        (Some("ephemeralcontainers"), Some(name)) if resource.plural == "pods" => {
            return ephemeral_containers(&req, payload, namespace, name, &query, &state).await
        }
        (Some("finalize"), Some(name)) => {
            return finalize(&req, payload, resource, name, &query, &state).await;
        }
        (Some("token"), Some(name))
            if resource.plural == "serviceaccounts" && method == Method::POST =>
        {
            return super::tokens::request(&req, payload, &query, &state, namespace, name).await;
        }
        (Some(sub @ ("exec" | "attach" | "portforward")), Some(name))
            if resource.plural == "pods" && (method == Method::GET || method == Method::POST) =>
        {
            return super::streams::serve(&req, payload, &state, namespace, name, sub, &query)
                .await;
        }
        (Some("proxy"), Some(name)) => {
            return super::proxy::serve(&req, payload, &state, resource.plural, namespace, name)
                .await;
        }
        // What is left of the subresources is the status alone, read and written below as
        // part of its object; any other's method is not one it serves (a DELETE of
        // `pods/x/log` must not delete the pod).
        (Some(sub), _) if sub != "status" => return Err(HttpError::MethodNotAllowed),
        _ => {}
    }
    if resource.is_binding() {
        return match (method, target.name.as_deref(), target.subresource.as_deref()) {
            (Method::POST, None, None) if target.namespace.is_some() => {
                binding(&req, payload, namespace, None, &query, &state).await
            }
            _ => Err(HttpError::MethodNotAllowed),
        };
    }
    if resource.is_review() {
        return match (method, target.name.as_deref(), target.subresource.as_deref()) {
            (Method::POST, None, None) if target.namespace.is_some() || !resource.namespaced => {
                let (value, warnings) =
                    read_object(&req, payload, resource, &query, &state).await?;
                let user = super::reviews::user_info(&req);
                // The authorizer answers for an authorized user (the secure port's, or whom a
                // request on the insecure port impersonates), and for the user an access
                // review names, whichever port asks; the insecure port's own user may do all.
                let authorized = {
                    use actix_web::HttpMessage;
                    req.extensions().contains::<RequestUser>()
                };
                let about_another =
                    matches!(resource.kind, "SubjectAccessReview" | "LocalSubjectAccessReview");
                let authorizer = state
                    .security
                    .as_ref()
                    .filter(|_| authorized || about_another)
                    .map(|security| &security.authorizer);
                let answered = match resource.kind {
                    "TokenReview" => super::tokens::review(&state, resource, value).await?,
                    _ => super::reviews::answer(resource, namespace, user, authorizer, value)?,
                };
                let mut response = json_bytes(StatusCode::CREATED, answered.to_string().into());
                add_warnings(&mut response, &warnings);
                Ok(response)
            }
            _ => Err(HttpError::MethodNotAllowed),
        };
    }
    // A namespaced resource's collection across namespaces (`/api/v1/pods`) is only read, as
    // in Kubernetes: a create names its namespace, and no one request deletes in all of them.
    let across_namespaces = resource.namespaced && target.namespace.is_none();
    match (method, target.name.as_deref()) {
        // `watch` makes a read of a collection a watch; a read of one object by its path
        // stays a read (Kubernetes' request info reads it so), and `/watch/` paths watch.
        (Method::GET, name) if target.legacy_watch || (name.is_none() && query.flag("watch")) => {
            let namespace = target.namespace.as_deref();
            super::watch::serve(&req, core, resource, namespace, name, &query, &state).await
        }
        (Method::POST | Method::DELETE, None) if across_namespaces => {
            Err(HttpError::MethodNotAllowed)
        }
        (Method::DELETE, None) if !resource.serves("deletecollection") => {
            Err(HttpError::MethodNotAllowed)
        }
        (Method::GET, None) if query.get("sendInitialEvents").is_some() => {
            // Its other problems too, this one last, as Kubernetes lists them.
            let mut causes = kplane_actors::core::list_option_problems(&query.list_options()?);
            causes.push(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
            Err(HttpError::Api(ApiError::invalid_options("ListOptions", causes)))
        }
        (Method::GET, None) => {
            let list =
                core.list(resource, target.namespace.as_deref(), &query.list_options()?).await?;
            list_response(&req, resource, &list, &query)
        }
        (Method::GET, Some(name)) => {
            core.require_revision(query.get("resourceVersion").filter(|v| !v.is_empty()))?;
            let object = core.get(resource, namespace, name).await?;
            object_response(&req, StatusCode::OK, resource, &object, &query)
        }
        (Method::POST, None) => {
            let (value, warnings) = read_object(&req, payload, resource, &query, &state).await?;
            let escalation = escalation(&req, &state, resource);
            if let Some(escalation) = &escalation {
                check_escalation(escalation, &state, resource, namespace, &value, true).await?;
            }
            let options = query.write_options(&req)?;
            let creation = creation_warnings(resource, &value);
            let created = core.create(resource, namespace, value, &options).await?;
            let mut response =
                object_response(&req, StatusCode::CREATED, resource, &created, &query)?;
            add_warnings(&mut response, &warnings);
            add_warnings(&mut response, &creation.of(&created));
            add_warnings(&mut response, &stored_warnings(resource, &created, false));
            add_warnings(&mut response, &core.pod_security_warnings(resource, &created));
            Ok(response)
        }
        (Method::PUT, Some(name)) => {
            let (mut value, warnings) =
                read_object(&req, payload, resource, &query, &state).await?;
            let escalation = escalation(&req, &state, resource);
            if let Some(escalation) = &escalation {
                let judged =
                    check_escalation(escalation, &state, resource, namespace, &value, false)
                        .await?;
                // The write replaces the version judged, or none (a 409 if it changed since):
                // a role narrowed meanwhile is not widened again unchecked.
                if let (Some(version), Some(meta)) = (judged, value["metadata"].as_object_mut()) {
                    meta.entry("resourceVersion").or_insert(json!(version));
                }
            }
            let mut options = query.write_options(&req)?;
            if resource.creates_on_update() && !status_only {
                // Kubernetes authorizes an update that creates its object as a create.
                options.create_denied = crate::auth::filter::create_denial(&req);
            }
            let before = pod_security_before(core, resource, name, status_only);
            let pod_before = match status_only {
                true => None,
                false => core.pod_before_write(resource, namespace, name).await,
            };
            let (updated, created) = if status_only {
                (core.update_status(resource, namespace, name, value, &options).await?, false)
            } else {
                core.put(resource, namespace, name, value, &options).await?
            };
            let code = if created { StatusCode::CREATED } else { StatusCode::OK };
            let mut response = object_response(&req, code, resource, &updated, &query)?;
            add_warnings(&mut response, &warnings);
            add_warnings(&mut response, &stored_warnings(resource, &updated, status_only));
            if !status_only {
                let psa =
                    core.pod_security_update_warnings(resource, pod_before.as_ref(), &updated);
                add_warnings(&mut response, &psa);
            }
            add_relabel_warnings(&mut response, core, name, before, &updated).await;
            Ok(response)
        }
        (Method::DELETE, Some(name)) if !status_only => {
            let options = read_delete_options(&req, payload, &query, &state).await?;
            let deleted = core.delete(resource, namespace, name, &options).await?;
            // 202 when dependents are not orphaned and the object is still there, as
            // Kubernetes answers.
            let marked = kplane_actors::core::left_marked(resource, &deleted);
            let code = match (marked, options.orphan_dependents) {
                (true, Some(false)) => StatusCode::ACCEPTED,
                _ => StatusCode::OK,
            };
            delete_response(&req, code, resource, &deleted, &query)
        }
        (Method::DELETE, None) => {
            let options = read_delete_options(&req, payload, &query, &state).await?;
            let deleted = core
                .delete_collection(
                    resource,
                    target.namespace.as_deref(),
                    &query.list_options()?,
                    &options,
                )
                .await?;
            list_response(&req, resource, &deleted, &query)
        }
        (Method::PATCH, Some(name)) => {
            // A value Kubernetes does not take is refused on every patch; the write options
            // carry a Strict one, and an apply checks its configuration whatever it says.
            let validation = query.field_validation(&req)?;
            let bytes = body::read(payload, state.max_body_bytes).await?;
            let escalation = escalation(&req, &state, resource);
            let Some(patch_type) = patch_type(&req)? else {
                let mut options = query.apply_options()?;
                options.create_denied = crate::auth::filter::create_denial(&req);
                let mut config = body::parse_yaml(&bytes)?;
                body::check_apply_config(resource, namespace, name, &mut config)?;
                if let Some(escalation) = &escalation {
                    // What the apply would store, checked before it is.
                    let dry = WriteOptions { dry_run: true, ..options.clone() };
                    let preview = core
                        .apply(resource, namespace, name, config.clone(), status_only, &dry)
                        .await?;
                    let preview = preview.object.to_value();
                    check_escalation(escalation, &state, resource, namespace, &preview, false)
                        .await?;
                }
                let creation = creation_warnings(resource, &config);
                let before = pod_security_before(core, resource, name, status_only);
                let pod_before = match status_only {
                    true => None,
                    false => core.pod_before_write(resource, namespace, name).await,
                };
                let applied =
                    core.apply(resource, namespace, name, config, status_only, &options).await?;
                let code = if applied.created { StatusCode::CREATED } else { StatusCode::OK };
                let mut response = object_response(&req, code, resource, &applied.object, &query)?;
                if applied.created {
                    add_warnings(&mut response, &creation.of(&applied.object));
                }
                let warnings = stored_warnings(resource, &applied.object, status_only);
                add_warnings(&mut response, &warnings);
                if !status_only {
                    let psa = core.pod_security_update_warnings(
                        resource,
                        pod_before.as_ref(),
                        &applied.object,
                    );
                    add_warnings(&mut response, &psa);
                }
                add_relabel_warnings(&mut response, core, name, before, &applied.object).await;
                return Ok(response);
            };
            let mut options = query.write_options(&req)?;
            // (Named at all, even `force=false`, as Kubernetes reads an optional flag.)
            if query.get("force").is_some() {
                let cause =
                    FieldError::forbidden("force", "may not be specified for non-apply patch");
                return Err(HttpError::Api(ApiError::invalid_options("PatchOptions", vec![cause])));
            }
            let (patch, findings) = body::parse_patch(patch_type, &bytes)?;
            if validation == body::FieldValidation::Strict {
                options.patch_findings = findings.clone();
            }
            if let Some(escalation) = &escalation {
                // What the patch would store, checked before it is.
                let dry = WriteOptions { dry_run: true, ..options.clone() };
                let preview = core
                    .patch(resource, namespace, name, patch_type, &patch, status_only, &dry)
                    .await?;
                let preview = preview.to_value();
                check_escalation(escalation, &state, resource, namespace, &preview, false).await?;
            }
            let before = pod_security_before(core, resource, name, status_only);
            let pod_before = match status_only {
                true => None,
                false => core.pod_before_write(resource, namespace, name).await,
            };
            let (patched, notes) = core
                .patch_with_notes(
                    resource,
                    namespace,
                    name,
                    patch_type,
                    &patch,
                    status_only,
                    &options,
                )
                .await?;
            let mut response = object_response(&req, StatusCode::OK, resource, &patched, &query)?;
            let mut warnings = Vec::new();
            if validation == body::FieldValidation::Warn {
                warnings.extend(findings);
                warnings
                    .extend(notes.unknown_fields.iter().map(|field| unknown_field_message(field)));
            }
            if !notes.repeated_owners.is_empty() {
                warnings.push(kplane_actors::model::owners::warning(&notes.repeated_owners, true));
            }
            warnings.extend(stored_warnings(resource, &patched, status_only));
            if !status_only {
                warnings.extend(core.pod_security_update_warnings(
                    resource,
                    pod_before.as_ref(),
                    &patched,
                ));
            }
            add_warnings(&mut response, &warnings);
            add_relabel_warnings(&mut response, core, name, before, &patched).await;
            Ok(response)
        }
        _ => Err(HttpError::MethodNotAllowed),
    }
}

/// For an authorized user (the secure port's, or whom a request on the insecure port
/// impersonates), what checks a write of a role or binding for escalation (None for other
/// resources, and for the insecure port's own user).
fn escalation<'a>(
    req: &HttpRequest,
    state: &'a AppState,
    resource: &ResourceType,
) -> Option<Escalation<'a>> {
    use actix_web::HttpMessage;
    if resource.group != resources::RBAC_GROUP {
        return None;
    }
    let user = req.extensions().get::<RequestUser>()?.0.clone();
    Some(Escalation { authorizer: &state.security.as_ref()?.authorizer, user })
}

/// Refuses a role or binding that would grant more than its writer holds (`creating`: a
/// create, with no stored object to compare). Returns the resourceVersion of the stored
/// object judged against, if any.
async fn check_escalation(
    escalation: &Escalation<'_>,
    state: &AppState,
    resource: &'static ResourceType,
    namespace: &str,
    object: &Value,
    creating: bool,
) -> Result<Option<String>, HttpError> {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let stored = match creating {
        true => None,
        false => match state.core.get(resource, namespace, name).await {
            Ok(stored) => Some(stored.to_value()),
            Err(ApiError::NotFound { .. }) => None,
            Err(error) => return Err(error.into()),
        },
    };
    let judged = stored.as_ref().and_then(|s| s.pointer("/metadata/resourceVersion")).cloned();
    let judged = judged.and_then(|v| v.as_str().map(String::from));
    // An update of what the garbage collector and finalizers work with alone (finalizers,
    // owner references) grants nothing, and is not checked, as in Kubernetes.
    if stored.as_ref().is_some_and(|stored| only_bookkeeping_differs(stored, object)) {
        return Ok(judged);
    }
    if matches!(resource.kind, "Role" | "ClusterRole") {
        escalation.check_role(resource.plural, namespace, object, stored.as_ref())?;
        return Ok(judged);
    }
    let role_name = object.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
    let role = match object.pointer("/roleRef/kind").and_then(Value::as_str) {
        Some("Role") => {
            resources::find(resources::RBAC_GROUP, "v1", "roles").map(|r| (r, namespace))
        }
        Some("ClusterRole") => {
            resources::find(resources::RBAC_GROUP, "v1", "clusterroles").map(|r| (r, ""))
        }
        // Validation refuses it.
        _ => return Ok(judged),
    };
    let Some((roles, role_namespace)) = role else { return Ok(judged) };
    let rules = match state.core.get(roles, role_namespace, role_name).await {
        Ok(role) => Some(
            role.to_value().get("rules").and_then(Value::as_array).cloned().unwrap_or_default(),
        ),
        Err(ApiError::NotFound { .. }) => None,
        Err(error) => return Err(error.into()),
    };
    escalation.check_binding(resource.plural, namespace, object, rules.as_deref())?;
    Ok(judged)
}

/// Whether `new` differs from `stored` only in metadata other than its labels and
/// annotations: finalizers, owner references and what the server keeps (Kubernetes'
/// `IsOnlyMutatingGCFields`).
fn only_bookkeeping_differs(stored: &Value, new: &Value) -> bool {
    let (Some(a), Some(b)) = (stored.as_object(), new.as_object()) else { return false };
    let meta = |o: &serde_json::Map<String, Value>, key: &str| {
        o.get("metadata").and_then(|m| m.get(key)).cloned().filter(|v| !v.is_null())
    };
    let content = |o: &serde_json::Map<String, Value>| -> Vec<(String, Value)> {
        let mut content: Vec<(String, Value)> = (o.iter())
            .filter(|(k, v)| {
                !matches!(k.as_str(), "metadata" | "kind" | "apiVersion") && !v.is_null()
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        content.sort_by(|x, y| x.0.cmp(&y.0));
        content
    };
    content(a) == content(b)
        && ["labels", "annotations"].iter().all(|key| meta(a, key) == meta(b, key))
}

/// The body of a subresource request that only takes `method` (405 otherwise), decoded as
/// the kind `(group, version, kind)` under the request's `fieldValidation`, with the warnings
/// to answer with.
pub(super) async fn checked_body_of(
    req: &HttpRequest,
    method: Method,
    payload: web::Payload,
    query: &Query,
    state: &AppState,
    kind: (&str, &str, &str),
) -> Result<(Value, Vec<String>), HttpError> {
    if req.method() != method {
        return Err(HttpError::MethodNotAllowed);
    }
    let validation = query.field_validation(req)?;
    let bytes = body::read(payload, state.max_body_bytes).await?;
    let (mut body, duplicates) = body::decode_noting_duplicates(req, &bytes)?;
    let warnings = validation.check_body(kind, &mut body, &duplicates)?;
    Ok((body, warnings))
}

/// POST `pods/{name}/binding`, or `namespaces/{ns}/bindings` (`name` None: the older way,
/// which custom schedulers written against client libraries still use, naming the pod in the
/// Binding's `metadata.name`): answers a Success `Status`, as Kubernetes does.
async fn binding(
    req: &HttpRequest,
    payload: web::Payload,
    namespace: &str,
    name: Option<&str>,
    query: &Query,
    state: &AppState,
) -> Result<HttpResponse, HttpError> {
    let kind = ("", "v1", "Binding");
    let (binding, warnings) =
        checked_body_of(req, Method::POST, payload, query, state, kind).await?;
    let named = binding.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let name = name.unwrap_or(named);
    if name.is_empty() {
        let causes = vec![FieldError::required("metadata.name")];
        let name = String::new();
        return Err(ApiError::Invalid { kind: "Binding", group: "", name, causes }.into());
    }
    state.core.bind(namespace, name, &binding, query.dry_run("CreateOptions")?).await?;
    Ok(created_success(&warnings))
}

/// The Success `Status` of a subresource created without an object to answer with.
fn created_success(warnings: &[String]) -> HttpResponse {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "code": 201});
    let mut response = json_bytes(StatusCode::CREATED, status.to_string().into());
    add_warnings(&mut response, warnings);
    response
}

/// POST `pods/{name}/eviction` (policy/v1 `Eviction`): the pod is deleted with the delete
/// options the body carries, unless its disruption budget refuses (429, which kubectl drain
/// retries). Answers a Success `Status`, as Kubernetes does.
async fn eviction(
    req: &HttpRequest,
    payload: web::Payload,
    namespace: &str,
    name: &str,
    query: &Query,
    state: &AppState,
) -> Result<HttpResponse, HttpError> {
    let kind = ("policy", "v1", "Eviction");
    let (eviction, warnings) =
        checked_body_of(req, Method::POST, payload, query, state, kind).await?;
    let api_version = eviction.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
    if !matches!(api_version, "policy/v1" | "policy/v1beta1") {
        return Err(HttpError::BadRequest(format!(
            "the body of an eviction must be a policy/v1 Eviction, not {api_version} Eviction"
        )));
    }
    // Decoded with the Eviction (the kind it names inside is not looked at, as Kubernetes
    // decodes it by its place in the Eviction).
    let delete_options = eviction.get("deleteOptions").filter(|o| !o.is_null());
    let options = query.delete_options(delete_options)?;
    state.core.evict(namespace, name, &eviction, options).await?;
    Ok(created_success(&warnings))
}

/// PUT `namespaces/{name}/finalize`: sets the namespace's `spec.finalizers` to the body's and
/// changes nothing else, as Kubernetes' finalize subresource does. A deleted namespace left
/// with no finalizer goes (the usual way out for one stuck in Terminating).
async fn finalize(
    req: &HttpRequest,
    payload: web::Payload,
    namespaces: &'static ResourceType,
    name: &str,
    query: &Query,
    state: &AppState,
) -> Result<HttpResponse, HttpError> {
    let kind = ("", "v1", "Namespace");
    let (namespace, warnings) =
        checked_body_of(req, Method::PUT, payload, query, state, kind).await?;
    let options = query.write_options(req)?;
    let finalized = state.core.finalize(name, namespace, &options).await?;
    let mut response = object_response(req, StatusCode::OK, namespaces, &finalized, query)?;
    add_warnings(&mut response, &warnings);
    Ok(response)
}

/// GET, PUT and PATCH on `replicationcontrollers/{name}/scale` (autoscaling/v1 `Scale`).
async fn scale(
    req: &HttpRequest,
    payload: web::Payload,
    namespace: &str,
    name: &str,
    query: &Query,
    state: &AppState,
) -> Result<HttpResponse, HttpError> {
    let core = &state.core;
    if req.method() == Method::GET {
        let scale = core.get_scale(namespace, name).await?;
        return Ok(match media::conversion(req, false) {
            Conversion::None | Conversion::Discovery(_) => {
                json_bytes(StatusCode::OK, scale.to_string().into())
            }
            Conversion::Table(version) => {
                let include = include_object(query)?;
                table_response(StatusCode::OK, table::table_of_scale(scale, include), version)
            }
            Conversion::Metadata(version) => {
                let metadata = scale.get("metadata").cloned().unwrap_or_default();
                let partial = partial::of_metadata(metadata, version).to_string();
                json_bytes(StatusCode::OK, partial.into())
            }
            Conversion::MetadataList(_) => {
                return Err(partial::object_refused("autoscaling", "Scale"))
            }
        });
    }
    if req.method() == Method::PATCH && patch_type(req)?.is_none() {
        // A server-side apply of the Scale: its manager owns the controller's replicas.
        let options = query.apply_options()?;
        let bytes = body::read(payload, state.max_body_bytes).await?;
        let mut config = body::parse_yaml(&bytes)?;
        let kind = ("autoscaling", "v1", "Scale");
        body::check_apply_config_as(kind, namespace, name, &mut config)?;
        let scale = core.apply_scale(namespace, name, config, &options).await?;
        return Ok(json_bytes(StatusCode::OK, scale.to_string().into()));
    }
    let options = query.write_options(req)?;
    let validation = query.field_validation(req)?;
    let (scale, warnings) = match subresource_write(req, payload, state).await? {
        Write::Replace(mut scale, duplicates) => {
            let kind = ("autoscaling", "v1", "Scale");
            let warnings = validation.check_body(kind, &mut scale, &duplicates)?;
            (core.update_scale(namespace, name, &scale, &options).await?, warnings)
        }
        Write::Patch(patch_type, patch) => {
            let (scale, unknown) =
                core.patch_scale(namespace, name, patch_type, &patch, &options).await?;
            let warnings = match validation {
                body::FieldValidation::Warn => {
                    unknown.iter().map(|field| unknown_field_message(field)).collect()
                }
                _ => Vec::new(),
            };
            (scale, warnings)
        }
    };
    let mut response = json_bytes(StatusCode::OK, scale.to_string().into());
    add_warnings(&mut response, &warnings);
    Ok(response)
}

/// What a PUT or a PATCH (not a server-side apply) of a subresource sends.
enum Write {
    /// The body, and the fields it repeated.
    Replace(Value, Vec<String>),
    Patch(PatchType, Value),
}

/// Reads the body of a PUT or PATCH of a subresource that takes no server-side apply (405 for
/// other methods).
async fn subresource_write(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> Result<Write, HttpError> {
    let method = req.method().clone();
    if method != Method::PUT && method != Method::PATCH {
        return Err(HttpError::MethodNotAllowed);
    }
    let patch_type = if method == Method::PATCH {
        let unapplied = HttpError::UnsupportedMediaType(UNAPPLIED_PATCH_MEDIA_TYPES);
        Some(patch_type(req)?.ok_or(unapplied)?)
    } else {
        None
    };
    let bytes = body::read(payload, state.max_body_bytes).await?;
    Ok(match patch_type {
        None => {
            let (body, duplicates) = body::decode_noting_duplicates(req, &bytes)?;
            Write::Replace(body, duplicates)
        }
        Some(patch_type) => Write::Patch(patch_type, body::parse_json(&bytes)?),
    })
}

/// GET, PUT and PATCH on `pods/{name}/ephemeralcontainers` (what `kubectl debug` patches):
/// the pod, of which a write changes only `spec.ephemeralContainers`, and only by adding.
async fn ephemeral_containers(
    req: &HttpRequest,
    payload: web::Payload,
    namespace: &str,
    name: &str,
    query: &Query,
    state: &AppState,
) -> Result<HttpResponse, HttpError> {
    let (core, pods) = (&state.core, resources::core("pods"));
    let mut warnings = Vec::new();
    let pod = if req.method() == Method::GET {
        core.get(pods, namespace, name).await?
    } else {
        let before = core.pod_before_write(pods, namespace, name).await;
        let options = query.write_options(req)?;
        let validation = query.field_validation(req)?;
        let pod = match subresource_write(req, payload, state).await? {
            Write::Replace(mut pod, duplicates) => {
                // The body is a whole Pod, decoded as the pod's own PUT decodes it.
                warnings = validation.check(pods, &mut pod, &duplicates)?;
                core.update_ephemeral_containers(namespace, name, pod, &options).await?
            }
            Write::Patch(patch_type, patch) => {
                core.patch_ephemeral_containers(namespace, name, patch_type, &patch, &options)
                    .await?
            }
        };
        warnings.extend(core.pod_security_update_warnings(pods, before.as_ref(), &pod));
        pod
    };
    let mut response = object_response(req, StatusCode::OK, pods, &pod, query)?;
    add_warnings(&mut response, &warnings);
    Ok(response)
}

/// The media types of a patch of ephemeral containers, which take no server-side apply here.
const UNAPPLIED_PATCH_MEDIA_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

/// The patch type a PATCH request's content type names; `None` for a server-side apply.
fn patch_type(req: &HttpRequest) -> Result<Option<PatchType>, HttpError> {
    match body::content_type(req).as_str() {
        "application/json-patch+json" => Ok(Some(PatchType::Json)),
        "application/merge-patch+json" => Ok(Some(PatchType::Merge)),
        "application/strategic-merge-patch+json" => Ok(Some(PatchType::StrategicMerge)),
        "application/apply-patch+yaml" => Ok(None),
        _ => Err(HttpError::UnsupportedMediaType(PATCH_MEDIA_TYPES)),
    }
}

async fn read_object(
    req: &HttpRequest,
    payload: web::Payload,
    resource: &ResourceType,
    query: &Query,
    state: &AppState,
) -> Result<(Value, Vec<String>), HttpError> {
    let validation = query.field_validation(req)?;
    let bytes = body::read(payload, state.max_body_bytes).await?;
    let (mut value, duplicates) = body::decode_noting_duplicates(req, &bytes)?;
    crate::auth::audit::note_request_object(req, state, &value);
    let mut warnings = validation.check(resource, &mut value, &duplicates)?;
    // The core drops repeated owner references, as Kubernetes does; the client is told.
    warnings.extend(kplane_actors::model::owners::duplicates_warning(&value));
    Ok((value, warnings))
}

/// Delete options from the query and an optional `DeleteOptions` JSON body.
async fn read_delete_options(
    req: &HttpRequest,
    payload: web::Payload,
    query: &Query,
    state: &AppState,
) -> Result<kplane_actors::core::DeleteOptions, HttpError> {
    let bytes = body::read(payload, state.max_body_bytes).await?;
    let blank = bytes.iter().all(u8::is_ascii_whitespace);
    let mut options = if blank { Value::Null } else { body::decode_object(req, &bytes)? };
    if options.is_null() {
        return query.delete_options(None);
    }
    body::check_delete_options(&mut options)?;
    // As in Kubernetes, the query's options count only when there is no body.
    Query::of("")?.delete_options(Some(&options))
}

/// What Kubernetes' strategy warns about a pod or pod template it creates
/// (`validation::pod_warnings`), worked out from the body before the write (reading the
/// stored object back would cost every create a parse); Kubernetes gives none on updates of
/// pods, nor on those of templates that leave them as they were. (A PUT creates none of these
/// kinds: their update does not create.)
struct CreationWarnings {
    /// A pod's name is checked once it is known (it may be generated).
    pod: bool,
    warnings: Vec<String>,
}

fn creation_warnings(resource: &ResourceType, body: &Value) -> CreationWarnings {
    use kplane_actors::model::validation::{pod_template_warnings, pod_warnings};
    let core = resource.group.is_empty();
    let (pod, warnings) = match resource.plural {
        "pods" if core => (true, pod_warnings(body)),
        "replicationcontrollers" if core => {
            let template = body.get("spec").and_then(|spec| spec.get("template"));
            (false, pod_template_warnings("spec.template", template))
        }
        "podtemplates" if core => (false, pod_template_warnings("template", body.get("template"))),
        _ => (false, Vec::new()),
    };
    CreationWarnings { pod, warnings }
}

impl CreationWarnings {
    /// The warnings about `created`.
    fn of(self, created: &StoredObject) -> Vec<String> {
        let name = self.pod.then_some(created.key.name.as_str());
        let named = name.and_then(kplane_actors::model::validation::pod_name_warning);
        named.into_iter().chain(self.warnings).collect()
    }
}

/// What Kubernetes' strategy warns about an object as written (a service's odd addresses and
/// ignored fields: `validation::service_warnings`); nothing about a status write.
fn stored_warnings(
    resource: &ResourceType,
    object: &StoredObject,
    status_only: bool,
) -> Vec<String> {
    if status_only || !ApiCore::is_service(resource) {
        return Vec::new();
    }
    kplane_actors::model::validation::service_warnings(&object.to_value())
}

/// A namespace's pod security labels before a write of it (`Some(None)`: it had none), which
/// the PodSecurity admission compares the written ones with; `None` for any other write.
type LabelsBefore = Option<Option<Arc<std::collections::BTreeMap<String, String>>>>;

fn pod_security_before(
    core: &ApiCore,
    resource: &ResourceType,
    name: &str,
    status_only: bool,
) -> LabelsBefore {
    (ApiCore::is_namespace(resource) && !status_only).then(|| core.pod_security_labels(name))
}

/// The PodSecurity admission's warnings about the pods of a namespace whose write made its
/// enforced standard stricter (a dry run's too: `kubectl label --dry-run=server` previews
/// them).
async fn add_relabel_warnings(
    response: &mut HttpResponse,
    core: &ApiCore,
    name: &str,
    before: LabelsBefore,
    written: &StoredObject,
) {
    if let Some(before) = before {
        let written = written.to_value();
        let warnings = core.pod_security_relabel_warnings(name, before.as_deref(), &written).await;
        add_warnings(response, &warnings);
    }
}

/// Adds each warning as a `Warning: 299 - "text"` header, its quotes escaped as the header's
/// quoted-string wants them (kubectl prints `Warning: unknown field "spec.bogus"`).
pub(super) fn add_warnings(response: &mut HttpResponse, warnings: &[String]) {
    for warning in warnings {
        let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
        let header = format!("299 - \"{escaped}\"");
        if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&header) {
            response.headers_mut().append(actix_web::http::header::WARNING, value);
        }
    }
}

/// A JSON answer, labelled plainly: converted ones (a Table, PartialObjectMetadata) too, as
/// kube-apiserver labels them (only discovery names its kind in the type).
pub(super) fn json_bytes(status: StatusCode, body: bytes::Bytes) -> HttpResponse {
    HttpResponse::build(status).content_type("application/json").body(body)
}

/// An object in the form `Accept` asks for: as it is, as a Table or as its metadata.
fn object_response(
    req: &HttpRequest,
    status: StatusCode,
    resource: &ResourceType,
    object: &Arc<StoredObject>,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    Ok(match media::conversion(req, false) {
        Conversion::None | Conversion::Discovery(_) => json_bytes(status, object.raw.clone()),
        Conversion::Table(version) => {
            let include = include_object(query)?;
            table_response(status, table::table_of_one(resource, object, include), version)
        }
        Conversion::Metadata(version) => {
            let partial = partial::of_object(object, version).to_string();
            json_bytes(status, partial.into())
        }
        Conversion::MetadataList(_) => {
            return Err(partial::object_refused(resource.group, resource.kind))
        }
    })
}

/// `includeObject`, which only a Table reads, as kube-apiserver checks it.
pub(super) fn include_object(query: &Query) -> Result<IncludeObject, HttpError> {
    IncludeObject::from_query(query.get("includeObject")).map_err(|value| {
        HttpError::BadRequest(format!(
            "Unable to convert to Table as requested: includeObject: Invalid value: {value:?}: \
             must be 'Metadata', 'Object', 'None', or empty"
        ))
    })
}

/// What a delete answers, as Kubernetes' storage does: the object while it is not gone yet (a
/// pod stopping, finalizers left) or when its kind returns deleted objects; otherwise a
/// Success `Status` naming it.
fn delete_response(
    req: &HttpRequest,
    code: StatusCode,
    resource: &ResourceType,
    deleted: &Arc<StoredObject>,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    if deleted.deleting || resource.returns_deleted_object() {
        return object_response(req, code, resource, deleted, query);
    }
    let mut details =
        json!({"name": deleted.key.name, "kind": resource.plural, "uid": deleted.uid});
    if !resource.group.is_empty() {
        details["group"] = json!(resource.group);
    }
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "details": details});
    Ok(json_bytes(StatusCode::OK, status.to_string().into()))
}

/// A Table of `meta.k8s.io` `version`.
pub(super) fn table_response(status: StatusCode, table: Value, version: &str) -> HttpResponse {
    let table = table::in_version(table, version).to_string();
    json_bytes(status, table.into())
}

/// A list in the form `Accept` asks for: as it is, as a Table or as its items' metadata.
fn list_response(
    req: &HttpRequest,
    resource: &ResourceType,
    list: &ObjectList,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    Ok(match media::conversion(req, false) {
        Conversion::None | Conversion::Discovery(_) => {
            json_bytes(StatusCode::OK, encode_list(resource, list))
        }
        Conversion::Table(version) => {
            let table = table::table(
                resource,
                &list.items,
                Some(list.resource_version),
                list.continue_token.as_deref().map(|token| (token, list.remaining_item_count)),
                include_object(query)?,
            );
            table_response(StatusCode::OK, table, version)
        }
        Conversion::MetadataList(version) => {
            json_bytes(StatusCode::OK, partial::of_list(list, version))
        }
        Conversion::Metadata(_) => return Err(partial::list_refused(resource)),
    })
}

/// Encodes a list by splicing the stored JSON bytes of each item, without their `apiVersion`
/// and `kind` (as kube-apiserver writes a list of built-in objects): no re-serialization.
pub fn encode_list(resource: &ResourceType, list: &ObjectList) -> bytes::Bytes {
    let mut metadata = serde_json::json!({"resourceVersion": list.resource_version.to_string()});
    if let Some(token) = &list.continue_token {
        metadata["continue"] = Value::String(token.clone());
    }
    if let Some(remaining) = list.remaining_item_count {
        metadata["remainingItemCount"] = remaining.into();
    }
    let size: usize = list.items.iter().map(|o| o.raw.len() + 1).sum();
    let mut out = BytesMut::with_capacity(size + 128);
    out.put_slice(b"{\"kind\":\"");
    out.put_slice(resource.list_kind.as_bytes());
    out.put_slice(b"\",\"apiVersion\":\"");
    out.put_slice(resource.api_version().as_bytes());
    out.put_slice(b"\",\"metadata\":");
    out.put_slice(metadata.to_string().as_bytes());
    out.put_slice(b",\"items\":[");
    for (i, item) in list.items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        list_items::put_item(&item.raw, &mut out);
    }
    out.put_slice(b"]}");
    out.freeze()
}

//! Server-side apply (PATCH with `application/apply-patch+yaml`): a field manager declares the
//! fields it wants; they are merged into the object (created when missing), fields it no
//! longer declares go, and a change to a field another manager owns is a conflict unless
//! forced.

use std::sync::Arc;

use serde_json::{json, Value};

use super::managed_fields::SERVER_METADATA;
use super::managed_fields::{self, FieldConflict, ManagedFields, Operation, Writer};
use super::{field_set, writer};
use super::{has_status, metadata, requested_revision, set_name, set_namespace, typed_object};
use super::{ApiCore, ApiError, Ownership, Part, View, WriteOptions, UPDATE_RETRIES};
use crate::model::{resources, FieldError, ObjectKey, ResourceType, StoredObject};

/// What an apply wrote.
pub struct Applied {
    pub object: Arc<StoredObject>,
    /// The object did not exist and was created.
    pub created: bool,
}

impl ApiCore {
    /// Applies `config` (a whole object as its manager wants it) to the object `name`, or
    /// only to its status when `status_only`. `options.field_manager` is required.
    pub async fn apply(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        config: Value,
        status_only: bool,
        options: &WriteOptions,
    ) -> Result<Applied, ApiError> {
        let manager = required_manager(options)?;
        if View::of(resource).is_some() {
            return Err(ApiError::UnsupportedMediaType(format!(
                "server-side apply is not supported for {}/{}; apply them through {}",
                resource.group,
                resource.plural,
                resources::storage_of(resource).api_version()
            )));
        }
        let part = if status_only { Part::Status } else { Part::Main };
        let (config, pins) = applied_configuration(resource, namespace, name, config, part)?;
        let writer = writer(resource, manager, Operation::Apply, part);
        let creates = !status_only;
        self.apply_as(resource, namespace, name, (config, pins), &writer, part, creates, options)
            .await
    }

    /// Applies an autoscaling/v1 `Scale` to replication controller `name` (an apply through
    /// its `scale` subresource): the manager owns the controller's `spec.replicas`, in an
    /// entry of its own (subresource `scale`), as Kubernetes records it. The Scale is checked
    /// by the caller; what it says besides its replicas and resourceVersion is not stored.
    pub async fn apply_scale(
        &self,
        namespace: &str,
        name: &str,
        scale: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let manager = required_manager(options)?;
        let rcs = resources::core("replicationcontrollers");
        let kind = (scale.get("apiVersion"), scale.get("kind"));
        if kind != (Some(&json!("autoscaling/v1")), Some(&json!("Scale"))) {
            return Err(ApiError::BadRequest(
                "the apply patch of a scale must be an autoscaling/v1 Scale".into(),
            ));
        }
        // Only what names the controller, and the revision it is applied to.
        let mut metadata = scale.get("metadata").cloned().unwrap_or_else(|| json!({}));
        if let Some(meta) = metadata.as_object_mut() {
            meta.retain(|k, _| ["name", "namespace", "resourceVersion"].contains(&k.as_str()));
        }
        let mut config =
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": metadata});
        if let Some(replicas) = scale.pointer("/spec/replicas").filter(|r| !r.is_null()) {
            config["spec"] = json!({"replicas": replicas});
        }
        let (config, pins) = applied_configuration(rcs, namespace, name, config, Part::Main)?;
        let mut writer = writer(rcs, manager, Operation::Apply, Part::Main);
        writer.subresource = "scale";
        let applied = self.apply_as(
            rcs,
            namespace,
            name,
            (config, pins),
            &writer,
            Part::Main,
            false,
            options,
        );
        match applied.await {
            Ok(applied) => Ok(super::subresources::scale_of(&applied.object.to_value())),
            Err(ApiError::NotFound { .. }) => Err(ApiError::NotFound {
                resource: "replicationcontrollers/scale",
                group: "autoscaling",
                name: name.into(),
            }),
            Err(error) => Err(error),
        }
    }

    /// Applies the configuration (with the resourceVersion and uid it pins) as `writer`,
    /// creating the object when it is missing and `creates`.
    #[allow(clippy::too_many_arguments)]
    async fn apply_as(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        (config, pins): (Value, Pins),
        writer: &Writer<'_>,
        part: Part,
        creates: bool,
        options: &WriteOptions,
    ) -> Result<Applied, ApiError> {
        let key = ObjectKey::new(resource, namespace, name);
        for _ in 0..UPDATE_RETRIES {
            let Some(current) = self.store.get(&key).await? else {
                if !creates {
                    return Err(ApiError::not_found(resource, name));
                }
                if let Some(denial) = &options.create_denied {
                    return Err(ApiError::forbidden(resource, name, denial.clone(), Vec::new()));
                }
                // A uid names an object that was there: none is (no new one is made for it).
                if let Some(uid) = &pins.uid {
                    return Err(ApiError::Conflict {
                        resource: resource.plural,
                        group: resource.group,
                        name: name.to_string(),
                        message: format!(
                            "Operation cannot be fulfilled on {} {name:?}: uid mismatch: the \
                             provided object specified uid {uid}, and no existing object was found",
                            resource.qualified_plural()
                        ),
                    });
                }
                let mut fields = ManagedFields::default();
                let mut object = fields
                    .apply(None, &config, writer, has_status(resource), options.force)
                    .expect("a create has nothing to conflict with");
                self.check_schema(resource, name, &mut object, false)?;
                let ownership = Ownership::Applied(fields);
                let created =
                    self.create_owned(resource, namespace, object, options.dry_run, ownership);
                match created.await {
                    // Someone else created it meanwhile: apply to theirs, once it is committed.
                    Err(ApiError::AlreadyExists { .. }) => {
                        self.store.settle(resource).await?;
                        continue;
                    }
                    other => return other.map(|object| Applied { object, created: true }),
                }
            };
            if let Some(uid) = pins.uid.as_deref().filter(|uid| *uid != current.uid) {
                let error = FieldError::invalid("metadata.uid", uid, "field is immutable");
                return Err(ApiError::invalid(resource, name, vec![error]));
            }
            let live = current.to_value();
            let mut fields = ManagedFields::of(&live)?;
            let separate = has_status(resource);
            let mut merged = fields
                .apply(Some(&live), &config, writer, separate, options.force)
                .or_else(|conflicts| {
                    let left = unexplained_conflicts(writer, &live, conflicts);
                    if !left.is_empty() {
                        return Err(left);
                    }
                    fields.apply(Some(&live), &config, writer, separate, true)
                })
                .map_err(|conflicts| ApiError::ApplyConflict { conflicts })?;
            keep_last_applied_in_step(writer, &live, &config, &mut merged);
            self.check_schema(resource, name, &mut merged, false)?;
            let rv = pins.revision.unwrap_or(current.resource_version);
            metadata(&mut merged)?.insert("resourceVersion".into(), json!(rv.to_string()));
            let ownership = Ownership::Applied(fields);
            let written =
                self.replace(resource, namespace, name, merged, options.dry_run, part, ownership);
            match written.await {
                Err(ApiError::Conflict { .. }) if pins.revision.is_none() => {
                    self.store.settle(resource).await?;
                }
                other => return other.map(|object| Applied { object, created: false }),
            }
        }
        Err(ApiError::Conflict {
            resource: resource.plural,
            group: resource.group,
            name: name.to_string(),
            message: "the object kept changing; try again".into(),
        })
    }
}

/// The field manager an apply names (422 without one).
fn required_manager(options: &WriteOptions) -> Result<&str, ApiError> {
    match options.field_manager.as_deref() {
        Some(m) if !m.is_empty() => Ok(m),
        _ => {
            let mut cause = FieldError::required("fieldManager");
            cause.message = "Required value: is required for apply patch".into();
            Err(ApiError::Invalid {
                kind: "PatchOptions",
                group: "meta.k8s.io",
                name: String::new(),
                causes: vec![cause],
            })
        }
    }
}

/// kubectl's field manager, which may take over what kubectl's client-side apply set.
const KUBECTL: &str = "kubectl";

/// As in Kubernetes, `kubectl apply --server-side` on an object managed by client-side apply
/// takes over, without conflicts, the fields of the last applied configuration: the conflicts
/// left are the others (none: the apply is forced).
fn unexplained_conflicts(
    writer: &Writer,
    live: &Value,
    conflicts: Vec<FieldConflict>,
) -> Vec<FieldConflict> {
    if writer.manager != KUBECTL {
        return conflicts;
    }
    let Some(allowed) = managed_fields::last_applied_fields(live) else {
        return conflicts;
    };
    conflicts.into_iter().filter(|c| !allowed.touches(&c.elements)).collect()
}

/// kubectl's server-side applies keep its client-side apply annotation (when the object has
/// one) equal to what was applied, so that a later client-side apply starts from it.
fn keep_last_applied_in_step(writer: &Writer, live: &Value, config: &Value, merged: &mut Value) {
    if writer.manager != KUBECTL || live.pointer(managed_fields::LAST_APPLIED_POINTER).is_none() {
        return;
    }
    let mut applied = config.clone();
    if let Some(annotations) =
        applied.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut)
    {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        if annotations.is_empty() {
            applied["metadata"].as_object_mut().map(|m| m.remove("annotations"));
        }
    }
    if let Some(annotations) =
        merged.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut)
    {
        annotations.insert(
            "kubectl.kubernetes.io/last-applied-configuration".into(),
            json!(format!("{applied}\n")),
        );
    }
}

/// What an applied configuration names of the object it is applied to: preconditions.
struct Pins {
    /// The resourceVersion: the object as it was then.
    revision: Option<u64>,
    /// The uid: that object, not another of its name (and not a new one).
    uid: Option<String>,
}

/// Checks an applied configuration and trims it to what a manager may own. Returns it with
/// the resourceVersion and uid it names.
fn applied_configuration(
    resource: &'static ResourceType,
    namespace: &str,
    name: &str,
    config: Value,
    part: Part,
) -> Result<(Value, Pins), ApiError> {
    let named =
        |field: &str| config.get(field).and_then(Value::as_str).is_some_and(|v| !v.is_empty());
    if !config.is_object() {
        return Err(ApiError::BadRequest("an apply patch must be an object".into()));
    }
    if !named("apiVersion") || !named("kind") {
        return Err(ApiError::BadRequest(
            "apiVersion and kind must be set in an apply patch".into(),
        ));
    }
    let mut config = typed_object(resource, without_nulls(config))?;
    // Items merge by their keys: a configuration naming one twice says nothing clear.
    let repeated = field_set::repeated_items(&config);
    if !repeated.is_empty() {
        let kind = (resource.group, resource.version, resource.kind);
        return Err(ApiError::BadRequest(typed_patch_error(namespace, name, kind, &repeated)));
    }
    let meta = metadata(&mut config)?;
    set_name(meta, name)?;
    set_namespace(resource, namespace, meta)?;
    let uid = meta.get("uid").and_then(Value::as_str).filter(|uid| !uid.is_empty());
    let pins = Pins { revision: requested_revision(meta)?, uid: uid.map(String::from) };
    if part == Part::Status {
        // A status apply declares the status only.
        meta.retain(|k, _| k == "name" || k == "namespace");
    } else {
        for field in SERVER_METADATA {
            meta.remove(*field);
        }
    }
    let object = config.as_object_mut().expect("typed_object returns an object");
    match part {
        Part::Status => {
            object.retain(|k, _| ["kind", "apiVersion", "metadata", "status"].contains(&k.as_str()))
        }
        Part::Main if has_status(resource) => {
            object.remove("status");
        }
        Part::Main | Part::Finalize | Part::EphemeralContainers => {}
    }
    Ok((config, pins))
}

/// The message of an applied configuration structured-merge-diff would not type, one error
/// or several, as kube-apiserver words it.
pub fn typed_patch_error(
    namespace: &str,
    name: &str,
    (group, version, kind): (&str, &str, &str),
    errors: &[String],
) -> String {
    let errors = match errors {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    format!(
        "failed to create typed patch object ({namespace}/{name}; {group}/{version}, \
         Kind={kind}): {errors}"
    )
}

/// The configuration without its null values: an applied null means "not mine", not a value.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::resources::find;

    async fn apply(
        core: &ApiCore,
        config: Value,
        manager: &str,
        force: bool,
    ) -> Result<Applied, ApiError> {
        let cms = find("", "v1", "configmaps").unwrap();
        let options = WriteOptions {
            field_manager: Some(manager.into()).filter(|m: &String| !m.is_empty()),
            force,
            ..Default::default()
        };
        core.apply(cms, "default", "c", config, false, &options).await
    }

    #[actix::test]
    async fn apply_creates_updates_conflicts_and_removes() {
        let core = crate::testing::core().await;
        let cms = find("", "v1", "configmaps").unwrap();
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1", "y": "1"}});
        let first = apply(&core, config, "ops", false).await.unwrap();
        assert!(first.created);
        let object = first.object.to_value();
        assert_eq!(object["metadata"]["managedFields"][0]["manager"], "ops");
        assert_eq!(object["metadata"]["managedFields"][0]["operation"], "Apply");

        // Another manager changes y by update: it takes y over.
        let patch = json!({"data": {"y": "2"}});
        let editor = WriteOptions { field_manager: Some("editor".into()), ..Default::default() };
        core.patch(cms, "default", "c", crate::core::PatchType::Merge, &patch, false, &editor)
            .await
            .unwrap();

        // Applying y=1 again is a conflict with the editor, unless forced.
        let again = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"x": "1", "y": "1"}});
        let conflict = apply(&core, again.clone(), "ops", false).await;
        let Err(ApiError::ApplyConflict { conflicts, .. }) = conflict else {
            panic!("expected a conflict, got {:?}", conflict.map(|a| a.object));
        };
        assert_eq!(conflicts[0].manager, "editor");
        assert_eq!(conflicts[0].path, ".data.y");
        let forced = apply(&core, again, "ops", true).await.unwrap();
        assert!(!forced.created);
        assert_eq!(forced.object.to_value()["data"], json!({"x": "1", "y": "1"}));

        // The label and x are no longer applied: they go, as nobody else holds them.
        let smaller = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"y": "1"}});
        let applied = apply(&core, smaller.clone(), "ops", false).await.unwrap().object;
        let value = applied.to_value();
        assert_eq!(value["data"], json!({"y": "1"}));
        assert!(value["metadata"].get("labels").is_none_or(|l| l == &json!({})));

        // The same configuration again changes nothing: nothing is written, the manager's time
        // included (a watcher hears of no change). (The entries dated back first, so that a
        // new time would show within the same second.)
        let mut dated = value.clone();
        for entry in dated["metadata"]["managedFields"].as_array_mut().unwrap() {
            entry["time"] = json!("2020-01-01T00:00:00Z");
        }
        let dated =
            core.update(cms, "default", "c", dated, &WriteOptions::default()).await.unwrap();
        let same = apply(&core, smaller, "ops", false).await.unwrap().object;
        assert_eq!(same.resource_version, dated.resource_version);
        let entries = same.to_value()["metadata"]["managedFields"].clone();
        let ops =
            entries.as_array().unwrap().iter().find(|e| e["manager"] == "ops").unwrap().clone();
        assert_eq!(ops["time"], "2020-01-01T00:00:00Z", "{entries}");
    }

    #[actix::test]
    async fn apply_requires_a_manager_and_a_typed_object() {
        let core = crate::testing::core().await;
        let untyped = json!({"metadata": {"name": "c"}});
        let error = apply(&core, untyped.clone(), "", false).await.err();
        assert!(matches!(error, Some(ApiError::Invalid { .. })));
        let error = apply(&core, untyped, "m", false).await.err();
        assert!(matches!(error, Some(ApiError::BadRequest(_))));
        let wrong_name =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}});
        let error = apply(&core, wrong_name, "m", false).await.err();
        assert!(matches!(error, Some(ApiError::BadRequest(_))));
    }
}

//! The subresources that are not a part of the object: `pods/binding` (assigns a pod to a node
//! once) and `replicationcontrollers/scale` (an autoscaling/v1 `Scale` view of the replicas).

use serde_json::{json, Value};

use super::UPDATE_RETRIES;
use super::{
    check_names, check_subresource_names, parse_rv, patch, ApiCore, ApiError, Ownership, Part,
    PatchType, WriteOptions,
};
use crate::model::{resources, validation, FieldError, ObjectKey};
use crate::store::{Preconditions, StoreError};

/// A `Binding` conflict, worded as Kubernetes words it.
fn binding_conflict(name: &str, message: String) -> ApiError {
    ApiError::Conflict {
        resource: "pods/binding",
        group: "",
        name: name.to_string(),
        message: format!("Operation cannot be fulfilled on pods/binding \"{name}\": {message}"),
    }
}

impl ApiCore {
    /// Binds a pending pod to a node (POST `pods/{name}/binding`): sets `spec.nodeName` and the
    /// PodScheduled condition. A pod is bound once: binding a bound or deleted pod is a 409.
    pub async fn bind(
        &self,
        namespace: &str,
        name: &str,
        binding: &Value,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        self.check_namespace_accepts(resources::core("pods"), namespace, name)?;
        check_subresource_names(binding, "Binding", namespace, name)?;
        let node = binding.pointer("/target/name").and_then(Value::as_str).unwrap_or("");
        let target_kind = binding.pointer("/target/kind").and_then(Value::as_str).unwrap_or("");
        let mut causes = Vec::new();
        if !target_kind.is_empty() && target_kind != "Node" {
            causes.push(FieldError::not_supported(
                "target.kind",
                target_kind,
                &["Node", "<empty>"],
            ));
        }
        if node.is_empty() {
            causes.push(FieldError::required("target.name"));
        }
        if !causes.is_empty() {
            return Err(ApiError::Invalid {
                kind: "Binding",
                group: "",
                name: name.into(),
                causes,
            });
        }
        let wanted_uid = binding.pointer("/metadata/uid").and_then(Value::as_str);
        let key = ObjectKey::new(resources::core("pods"), namespace, name);
        for _ in 0..UPDATE_RETRIES {
            let current = self
                .store
                .get(&key)
                .await?
                .ok_or_else(|| ApiError::not_found(resources::core("pods"), name))?;
            let mut pod = current.to_value();
            if wanted_uid.is_some_and(|uid| uid != current.uid) {
                return Err(binding_conflict(
                    name,
                    format!(
                        "the UID in the binding ({}) does not match the pod",
                        wanted_uid.unwrap_or("")
                    ),
                ));
            }
            if pod.pointer("/metadata/deletionTimestamp").is_some() {
                return Err(binding_conflict(
                    name,
                    format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            if let Some(bound) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
                if !bound.is_empty() {
                    return Err(binding_conflict(
                        name,
                        format!("pod {name} is already assigned to node \"{bound}\""),
                    ));
                }
            }
            let gated = pod.pointer("/spec/schedulingGates").and_then(Value::as_array);
            if gated.is_some_and(|gates| !gates.is_empty()) {
                let message = format!("pod {name} has non-empty .spec.schedulingGates");
                return Err(binding_conflict(name, message));
            }
            pod["spec"]["nodeName"] = json!(node);
            if let Some(annotations) =
                binding.pointer("/metadata/annotations").and_then(Value::as_object)
            {
                let meta = &mut pod["metadata"];
                if !meta["annotations"].is_object() {
                    meta["annotations"] = json!({});
                }
                for (k, v) in annotations {
                    meta["annotations"][k] = v.clone();
                }
            }
            set_condition(&mut pod, "PodScheduled", "True", None, None);
            if dry_run {
                return Ok(());
            }
            let preconditions =
                Preconditions { resource_version: Some(current.resource_version), uid: None };
            match self.store.update(key.clone(), pod, preconditions).await {
                Err(StoreError::Conflict { .. }) => {
                    self.store.settle(resources::core("pods")).await?
                }
                other => return other.map(|_| ()).map_err(Into::into),
            }
        }
        Err(binding_conflict(name, "the pod kept changing; try again".into()))
    }

    /// The `Scale` of a replication controller; a missing one is a missing Scale, as
    /// Kubernetes words it (`replicationcontrollers/scale.autoscaling "x" not found`).
    pub async fn get_scale(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        match self.get(resources::core("replicationcontrollers"), namespace, name).await {
            Ok(rc) => Ok(scale_of(&rc.to_value())),
            Err(ApiError::NotFound { .. }) => Err(ApiError::NotFound {
                resource: "replicationcontrollers/scale",
                group: "autoscaling",
                name: name.into(),
            }),
            Err(error) => Err(error),
        }
    }

    /// Sets the replicas of a replication controller from a `Scale` (PUT `.../scale`). A
    /// resourceVersion or uid in the Scale is a precondition on the controller.
    pub async fn update_scale(
        &self,
        namespace: &str,
        name: &str,
        scale: &Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        // The scale names its object as a replace's body does: the URL's name and namespace.
        let unnamed = serde_json::Map::new();
        let meta = scale.get("metadata").and_then(Value::as_object).unwrap_or(&unnamed);
        check_names(resources::core("replicationcontrollers"), meta, namespace, name)?;
        // Checked as Kubernetes' `ValidateScale`: the metadata, then the replicas.
        let mut causes = validation::validate_meta_fields(Some(&Value::Object(meta.clone())));
        let replicas = match scale.pointer("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(v) => match v.as_i64().filter(|r| *r >= 0 && *r <= i64::from(i32::MAX)) {
                Some(replicas) => replicas,
                None => {
                    let why = "must be greater than or equal to 0";
                    causes.push(FieldError::invalid_number("spec.replicas", v, why));
                    0
                }
            },
        };
        if !causes.is_empty() {
            return Err(ApiError::Invalid {
                kind: "Scale",
                group: "autoscaling",
                name: name.into(),
                causes,
            });
        }
        let requested_rv = match scale.pointer("/metadata/resourceVersion").and_then(Value::as_str)
        {
            None | Some("") => None,
            Some(rv) => Some(rv.to_string()),
        };
        if let Some(rv) = &requested_rv {
            parse_rv(rv)?;
        }
        let asked_uid = scale.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
        let rcs = resources::core("replicationcontrollers");
        for _ in 0..UPDATE_RETRIES {
            let current = self.get(rcs, namespace, name).await?;
            let mut rc = current.to_value();
            // A uid in the Scale is a precondition on the controller too.
            let uid = rc.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
            if !asked_uid.is_empty() && asked_uid != uid {
                return Err(ApiError::Conflict {
                    resource: "replicationcontrollers/scale",
                    group: "",
                    name: name.into(),
                    message: format!(
                        "Operation cannot be fulfilled on replicationcontrollers/scale {name:?}: \
                         Precondition failed: UID in precondition: {asked_uid}, UID in object \
                         meta: {uid}"
                    ),
                });
            }
            rc["spec"]["replicas"] = json!(replicas);
            let rv = requested_rv.clone().unwrap_or_else(|| current.resource_version.to_string());
            rc["metadata"]["resourceVersion"] = json!(rv);
            let ownership = Ownership::Scaled(self.manager(options));
            let written =
                self.replace(rcs, namespace, name, rc, options.dry_run, Part::Main, ownership);
            match written.await {
                Err(ApiError::Conflict { .. }) if requested_rv.is_none() => {
                    self.store.settle(rcs).await?
                }
                other => return other.map(|rc| scale_of(&rc.to_value())),
            }
        }
        Err(ApiError::Conflict {
            resource: rcs.plural,
            group: "",
            name: name.into(),
            message: "the object kept changing; try again".into(),
        })
    }

    /// Patches the `Scale` of a replication controller; with the paths of the fields the
    /// patch set that a Scale does not declare (dropped, to be warned about).
    pub async fn patch_scale(
        &self,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        options: &WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let current = self.get_scale(namespace, name).await?;
        let mut patched = patch::apply(&current, patch_type, patch)?;
        // What the patch leaves is decoded as a Scale (422 on `patch`, as for a resource).
        let strict = options.strict_fields;
        let unknown = self.check_schema_as("autoscaling", "Scale", &mut patched, strict);
        let unknown = unknown.map_err(|decoding| {
            super::patch_not_decodable(patch_type, patch, &patched, decoding)
        })?;
        // Unless the patch names a resourceVersion, it applies to the latest controller.
        if patch.pointer("/metadata/resourceVersion").is_none() {
            if let Some(meta) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
        }
        Ok((self.update_scale(namespace, name, &patched, options).await?, unknown))
    }
}

/// The autoscaling/v1 `Scale` view of a replication controller. Zero replicas are left out of
/// its spec, as Go writes a `ScaleSpec` (its `replicas` is no pointer); its status always has
/// them.
pub(super) fn scale_of(rc: &Value) -> Value {
    let meta = &rc["metadata"];
    let selector = rc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|s| {
            s.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": match rc.pointer("/spec/replicas") {
            Some(replicas) if replicas.as_i64() != Some(0) => json!({"replicas": replicas}),
            _ => json!({}),
        },
        "status": {
            "replicas": rc.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

/// Sets (or replaces) a pod condition, stamping the transition time when the status changes.
pub fn set_condition(
    pod: &mut Value,
    kind: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
) {
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    let mut condition = json!({"type": kind, "status": status, "lastProbeTime": null});
    if let Some(reason) = reason {
        condition["reason"] = json!(reason);
    }
    if let Some(message) = message {
        condition["message"] = json!(message);
    }
    let status = pod["status"].as_object_mut().expect("set to an object above");
    crate::model::put_condition(status, condition);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view_of_a_controller() {
        let rc = json!({"metadata":{"name":"web","namespace":"default","uid":"u","resourceVersion":"7"},
            "spec":{"replicas":3,"selector":{"app":"web","tier":"fe"}},"status":{"replicas":2}});
        let scale = scale_of(&rc);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 2);
        assert_eq!(scale["status"]["selector"], "app=web,tier=fe");
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
        let idle = json!({"metadata": {"name": "idle"}, "spec": {"replicas": 0},
            "status": {"replicas": 0}});
        let scale = scale_of(&idle);
        assert_eq!((&scale["spec"], &scale["status"]["replicas"]), (&json!({}), &json!(0)));
    }

    #[actix::test]
    async fn the_scale_of_a_missing_controller_is_a_missing_scale() {
        let core = crate::testing::core().await;
        let error = core.get_scale("default", "nope").await.unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"replicationcontrollers/scale.autoscaling "nope" not found"#
        );
    }

    #[actix::test]
    async fn a_scale_is_recorded_as_written_through_the_scale_subresource() {
        let core = crate::testing::core().await.with_field_manager("kubectl");
        let rcs = resources::core("replicationcontrollers");
        let rc = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
            "selector": {"app": "web"}, "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let options = crate::core::WriteOptions::default();
        core.create(rcs, "default", rc, &options).await.unwrap();
        let scale = json!({"metadata": {"name": "web"}, "spec": {"replicas": 3}});
        core.update_scale("default", "web", &scale, &options).await.unwrap();
        let stored = core.get(rcs, "default", "web").await.unwrap().to_value();
        let entries = stored["metadata"]["managedFields"].as_array().unwrap();
        let scaled = entries.iter().find(|e| e["subresource"] == "scale").expect("a scale entry");
        assert_eq!(scaled["manager"], "kubectl");
        assert_eq!(scaled["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        // A uid is a precondition, through a patch too.
        let uid = stored["metadata"]["uid"].as_str().unwrap();
        let other = json!({"metadata": {"name": "web", "uid": "abc"}, "spec": {"replicas": 2}});
        let refused = core.update_scale("default", "web", &other, &options).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "Operation cannot be fulfilled on replicationcontrollers/scale \"web\": \
                 Precondition failed: UID in precondition: abc, UID in object meta: {uid}"
            )
        );
        let patch = json!({"metadata": {"uid": "zzz"}, "spec": {"replicas": 2}});
        let patched = core.patch_scale("default", "web", PatchType::Merge, &patch, &options).await;
        assert!(matches!(patched, Err(ApiError::Conflict { .. })), "{patched:?}");

        let same = json!({"metadata": {"name": "web", "uid": uid}, "spec": {"replicas": 2}});
        core.update_scale("default", "web", &same, &options).await.unwrap();

        // Its metadata is checked as an object's, with the replicas, in one answer.
        let labelled = json!({"metadata": {"name": "web", "labels": {"a": "-x-"}},
            "spec": {"replicas": -1}});
        let refused = core.update_scale("default", "web", &labelled, &options).await;
        let Err(ApiError::Invalid { kind: "Scale", causes, .. }) = refused else {
            panic!("{refused:?}")
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.labels", "spec.replicas"]);
    }

    #[actix::test]
    async fn a_binding_targets_a_node() {
        let core = crate::testing::core().await;
        let pods = resources::core("pods");
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &crate::core::WriteOptions::default()).await.unwrap();
        let to_a_pod =
            json!({"metadata": {"name": "p"}, "target": {"kind": "Pod", "name": "other"}});
        let refused = core.bind("default", "p", &to_a_pod, false).await;
        let Err(ApiError::Invalid { causes, .. }) = refused else { panic!("{refused:?}") };
        assert_eq!(causes[0].field, "target.kind");
        // The body names the URL's pod, checked before its target, as Kubernetes' storage
        // checks it (a missing name is another name); a namespace given must be the URL's.
        let named = |metadata: Value| json!({"metadata": metadata, "target": {"name": ""}});
        let refusals = [
            (named(json!({})), "name in URL does not match name in Binding object"),
            (named(json!({"name": "q"})), "name in URL does not match name in Binding object"),
            (
                named(json!({"name": "p", "namespace": "kube-system"})),
                "the namespace of the provided object does not match the namespace sent on the \
                 request",
            ),
        ];
        for (binding, message) in refusals {
            let refused = core.bind("default", "p", &binding, false).await.unwrap_err();
            assert!(matches!(&refused, ApiError::BadRequest(m) if m == message), "{refused}");
        }
        let to_a_node = json!({"metadata": {"name": "p", "namespace": "default"},
            "target": {"kind": "Node", "name": "n1"}});
        core.bind("default", "p", &to_a_node, false).await.unwrap();
    }

    #[test]
    fn conditions_keep_their_transition_time_while_unchanged() {
        let mut pod = json!({"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"t0"}]}});
        set_condition(&mut pod, "Ready", "True", None, None);
        assert_eq!(pod["status"]["conditions"][0]["lastTransitionTime"], "t0");
        set_condition(&mut pod, "Ready", "False", Some("ContainersNotReady"), None);
        assert_ne!(pod["status"]["conditions"][0]["lastTransitionTime"], "t0");
        set_condition(&mut pod, "PodScheduled", "True", None, None);
        assert_eq!(pod["status"]["conditions"].as_array().unwrap().len(), 2);
    }
}

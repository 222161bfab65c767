//! Defaulting: the fields Kubernetes fills in when a client leaves them out.

use serde_json::{json, Map, Value};

/// Fills the defaults of `kind` into `object` (a create or a full update).
pub(crate) fn apply(kind: &str, object: &mut Value) {
    match kind {
        "Pod" => {
            if let Some(spec) = object.get_mut("spec") {
                pod_spec(spec);
            }
            let status = object_field(object, "status");
            status.entry("phase").or_insert_with(|| json!("Pending"));
            status.entry("qosClass").or_insert_with(|| json!("BestEffort"));
        }
        "ReplicationController" => {
            let labels = object.pointer("/spec/template/metadata/labels").cloned();
            let spec = object_field(object, "spec");
            spec.entry("replicas").or_insert(json!(1));
            if let Some(labels) = labels {
                spec.entry("selector").or_insert(labels.clone());
            }
            if let Some(pod) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
                pod_spec(pod);
            }
            let meta_labels = object.pointer("/spec/template/metadata/labels").cloned();
            if let Some(labels) = meta_labels {
                object_field(object, "metadata").entry("labels").or_insert(labels);
            }
            object_field(object, "status").entry("replicas").or_insert(json!(0));
        }
        "Service" => {
            let spec = object_field(object, "spec");
            spec.entry("type").or_insert(json!("ClusterIP"));
            spec.entry("sessionAffinity").or_insert(json!("None"));
            if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
                spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
            }
            for port in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(port) = port.as_object_mut() {
                    port.entry("protocol").or_insert(json!("TCP"));
                    if let Some(p) = port.get("port").cloned() {
                        port.entry("targetPort").or_insert(p);
                    }
                }
            }
            object_field(object, "status").entry("loadBalancer").or_insert(json!({}));
        }
        "Namespace" => {
            object_field(object, "spec").entry("finalizers").or_insert(json!(["kubernetes"]));
            object_field(object, "status").entry("phase").or_insert(json!("Active"));
        }
        "Secret" => {
            object.as_object_mut().map(|o| o.entry("type").or_insert(json!("Opaque")));
        }
        "PersistentVolume" => {
            let spec = object_field(object, "spec");
            spec.entry("persistentVolumeReclaimPolicy").or_insert(json!("Retain"));
            spec.entry("volumeMode").or_insert(json!("Filesystem"));
            object_field(object, "status").entry("phase").or_insert(json!("Pending"));
        }
        "PersistentVolumeClaim" => {
            object_field(object, "spec").entry("volumeMode").or_insert(json!("Filesystem"));
            object_field(object, "status").entry("phase").or_insert(json!("Pending"));
        }
        _ => {}
    }
}

fn object_field<'a>(object: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    let map = object.as_object_mut().expect("objects are JSON objects");
    let entry = map.entry(field).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

fn pod_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    spec.entry("restartPolicy").or_insert(json!("Always"));
    spec.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
    spec.entry("schedulerName").or_insert(json!("default-scheduler"));
    spec.entry("terminationGracePeriodSeconds").or_insert(json!(30));
    spec.entry("securityContext").or_insert(json!({}));
    spec.entry("enableServiceLinks").or_insert(json!(true));
    for list in ["initContainers", "containers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            container(c);
        }
    }
}

fn container(c: &mut Value) {
    let Some(c) = c.as_object_mut() else { return };
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let untagged = !image.rsplit('/').next().unwrap_or("").contains(':') && !image.contains('@');
    let policy = if untagged || image.ends_with(":latest") { "Always" } else { "IfNotPresent" };
    c.entry("imagePullPolicy").or_insert(json!(policy));
    c.entry("terminationMessagePath").or_insert(json!("/dev/termination-log"));
    c.entry("terminationMessagePolicy").or_insert(json!("File"));
    c.entry("resources").or_insert(json!({}));
    for port in c.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(port) = port.as_object_mut() {
            port.entry("protocol").or_insert(json!("TCP"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_defaults() {
        let mut pod = json!({"spec":{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}]}]}});
        apply("Pod", &mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(pod["status"]["phase"], "Pending");
    }

    #[test]
    fn service_and_rc_defaults() {
        let mut svc = json!({"spec":{"ports":[{"port":80}]}});
        apply("Service", &mut svc);
        assert_eq!(svc["spec"]["ports"][0], json!({"port":80,"protocol":"TCP","targetPort":80}));
        let mut rc = json!({"metadata":{},"spec":{"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[]}}}});
        apply("ReplicationController", &mut rc);
        assert_eq!(rc["spec"]["replicas"], 1);
        assert_eq!(rc["spec"]["selector"], json!({"a":"b"}));
        assert_eq!(rc["metadata"]["labels"], json!({"a":"b"}));
    }
}

//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).
//!
//! kubectl's typed clients (`create namespace|configmap|secret|service|role|token ...`, `run`,
//! `debug`, `drain`, `auth can-i`) send objects as the 4-byte magic `k8s\0` followed by a
//! `runtime.Unknown` envelope whose `raw` field holds the typed message. This module owns
//! unwrapping that envelope and turning the message into the JSON form the rest of the server
//! works with, field by field, through the table `fields.rs` generated from the k8s-pb bindings
//! and the served OpenAPI schemas: every field of every served kind, nothing dropped.
//!
//! Go writes every field that is not a pointer, zero or not, and protobuf cannot tell the two
//! apart; JSON from Go leaves the zero of an `omitempty` one out. So the zero (an empty string,
//! a `false`, a `0`) of the fields [`openapi::omitted_zeros`] names is left out, and any other
//! zero kept: a pointer's is a value of its own (`replicas: 0`, `runAsUser: 0`,
//! `automountServiceAccountToken: false`), and a field without `omitempty` is written even
//! when zero (`restartCount: 0`).

mod fields;
mod table;

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kplane_actors::model::text::go_duration;
use prost::encoding::{decode_key, decode_varint, WireType};
use prost::Message as _;
use serde_json::{json, Map, Value};

use super::openapi;
use fields::MESSAGES;
use table::{Field, Kind, Message};

/// The magic prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// How deep messages may nest in a body: deeper than any served kind (none of whose messages
/// contains itself), a guard should a later table add one that does.
const MAX_DEPTH: usize = 64;

/// Seconds of Go's zero `time.Time` since the Unix epoch (written when a time is unset).
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Decodes a Kubernetes protobuf body into the object's JSON form. Returns `Err` with a
/// human-readable message for a missing magic, malformed bytes, a content encoding, or a kind
/// kplane does not serve.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| "protobuf body does not start with the k8s magic prefix".to_string())?;
    let unknown = Unknown::decode(rest).map_err(|e| format!("malformed protobuf envelope: {e}"))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if let Some(enc) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(format!("unsupported protobuf content encoding {enc:?}"));
    }
    let message = message_of(&api_version, &kind).ok_or_else(|| {
        format!("protobuf bodies of kind {kind:?} in {api_version:?} are not supported; send JSON or YAML")
    })?;
    let raw = unknown.raw.unwrap_or_default();
    let mut out = Map::new();
    out.insert("kind".into(), json!(kind));
    out.insert("apiVersion".into(), json!(api_version));
    read_message(message, &raw, &mut out, 0)
        .map_err(|e| format!("malformed protobuf {kind} object: {e}"))?;
    Ok(Value::Object(out))
}

/// The message of `kind` in `api_version`: `io.k8s.api.<group's first label>.<version>.<kind>`
/// (`core` for the legacy group), and DeleteOptions from meta/v1 in any group.
fn message_of(api_version: &str, kind: &str) -> Option<&'static Message> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let name = if kind == "DeleteOptions" {
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions".to_string()
    } else {
        let package = if group.is_empty() { "core" } else { group.split('.').next()? };
        format!("io.k8s.api.{package}.{version}.{kind}")
    };
    table::find(&name).map(|i| &MESSAGES[i])
}

/// Reads the fields of `message` from `bytes` into `out`.
fn read_message(
    message: &Message,
    mut bytes: &[u8],
    out: &mut Map<String, Value>,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}"));
    }
    let buf = &mut bytes;
    while !buf.is_empty() {
        let (tag, wire) = decode_key(buf).map_err(|e| e.to_string())?;
        let Some(field) = message.field(tag) else {
            // A field this build does not know, as Kubernetes' decoder skips it.
            skip(wire, buf)?;
            continue;
        };
        if field.repeated && wire == WireType::LengthDelimited && is_packable(field.kind) {
            let packed = take_bytes(buf)?;
            let items = &mut &packed[..];
            while !items.is_empty() {
                let value = scalar(field.kind, WireType::Varint, items)?;
                push(out, field.json, value);
            }
            continue;
        }
        match field.kind {
            Kind::Message(index) => {
                expect(wire, WireType::LengthDelimited)?;
                let inner = take_bytes(buf)?;
                let nested = &MESSAGES[index];
                if field.json.is_empty() {
                    // A Go embedded struct: its fields are its parent's in JSON.
                    read_message(nested, inner, out, depth + 1)?;
                    continue;
                }
                let value = message_value(nested, inner, depth + 1)?;
                if field.repeated {
                    push(out, field.json, value);
                } else if !value.is_null() {
                    out.insert(field.json.into(), value);
                }
            }
            Kind::MapOfString | Kind::MapOfBytes | Kind::MapOfMessage(_) => {
                expect(wire, WireType::LengthDelimited)?;
                let (key, value) = map_entry(field.kind, take_bytes(buf)?, depth + 1)?;
                let map = out.entry(field.json).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            kind => {
                let value = scalar(kind, wire, buf)?;
                if field.repeated {
                    push(out, field.json, value);
                } else if !left_out(message, field, &value) {
                    out.insert(field.json.into(), value);
                }
            }
        }
    }
    Ok(())
}

/// A message's JSON: an object, or the JSON form of the apimachinery types that have one of
/// their own.
fn message_value(message: &Message, bytes: &[u8], depth: usize) -> Result<Value, String> {
    let mut fields = Map::new();
    read_message(message, bytes, &mut fields, depth)?;
    let int = |name: &str| fields.get(name).and_then(Value::as_i64).unwrap_or(0);
    let text = |name: &str| fields.get(name).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(match message.name {
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Value::String(text("string")),
        // A user's extra values: a list of strings in JSON, a message holding one in protobuf.
        "io.k8s.api.authentication.v1.ExtraValue" | "io.k8s.api.authorization.v1.ExtraValue" => {
            fields.get("items").cloned().unwrap_or_else(|| json!([]))
        }
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => match int("type") {
            1 => Value::String(text("strVal")),
            _ => json!(int("intVal")),
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time" => time(int("seconds"), 0, false),
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            time(int("seconds"), int("nanos"), true)
        }
        "io.k8s.apimachinery.pkg.apis.meta.v1.Duration" => {
            Value::String(go_duration(int("duration")))
        }
        "io.k8s.apimachinery.pkg.runtime.RawExtension"
        | "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            let raw = fields.get("raw").and_then(Value::as_str).unwrap_or("");
            let raw =
                base64::engine::general_purpose::STANDARD.decode(raw).map_err(|e| e.to_string())?;
            if raw.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&raw).map_err(|e| format!("embedded JSON: {e}"))?
            }
        }
        _ => Value::Object(fields),
    })
}

/// A Kubernetes time as JSON: RFC 3339 in UTC, to the second (`metav1.Time`) or microsecond
/// (`metav1.MicroTime`); `null` for Go's zero time, which is how an unset one is written.
fn time(seconds: i64, nanos: i64, micro: bool) -> Value {
    if seconds == GO_ZERO_TIME || (seconds == 0 && nanos == 0) {
        return Value::Null;
    }
    let Some(at) = chrono::DateTime::from_timestamp(seconds, nanos.clamp(0, 999_999_999) as u32)
    else {
        return Value::Null;
    };
    let format = if micro { "%Y-%m-%dT%H:%M:%S%.6fZ" } else { "%Y-%m-%dT%H:%M:%SZ" };
    Value::String(at.format(format).to_string())
}

/// One entry of a map field: its key (tag 1) and value (tag 2).
fn map_entry(kind: Kind, mut bytes: &[u8], depth: usize) -> Result<(String, Value), String> {
    let buf = &mut bytes;
    let (mut key, mut value) = (String::new(), None);
    while !buf.is_empty() {
        let (tag, wire) = decode_key(buf).map_err(|e| e.to_string())?;
        match (tag, kind) {
            (1, _) => key = scalar(Kind::String, wire, buf)?.as_str().unwrap_or("").to_string(),
            (2, Kind::MapOfString) => value = Some(scalar(Kind::String, wire, buf)?),
            (2, Kind::MapOfBytes) => value = Some(scalar(Kind::Bytes, wire, buf)?),
            (2, Kind::MapOfMessage(index)) => {
                expect(wire, WireType::LengthDelimited)?;
                value = Some(message_value(&MESSAGES[index], take_bytes(buf)?, depth)?);
            }
            _ => skip(wire, buf)?,
        }
    }
    let value = match (value, kind) {
        (Some(value), _) => value,
        // An entry without its value holds the value's zero.
        (None, Kind::MapOfMessage(index)) => message_value(&MESSAGES[index], &[], depth)?,
        (None, _) => Value::String(String::new()),
    };
    Ok((key, value))
}

/// A scalar field's value.
fn scalar(kind: Kind, wire: WireType, buf: &mut &[u8]) -> Result<Value, String> {
    Ok(match kind {
        Kind::String => {
            expect(wire, WireType::LengthDelimited)?;
            let bytes = take_bytes(buf)?;
            let text = std::str::from_utf8(bytes).map_err(|_| "a string is not UTF-8")?;
            Value::String(text.to_string())
        }
        Kind::Bytes => {
            expect(wire, WireType::LengthDelimited)?;
            Value::String(base64::engine::general_purpose::STANDARD.encode(take_bytes(buf)?))
        }
        Kind::Bool => {
            expect(wire, WireType::Varint)?;
            Value::Bool(varint(buf)? != 0)
        }
        Kind::Int => {
            expect(wire, WireType::Varint)?;
            // int32 and int64 alike: a negative int32 is written sign-extended to 64 bits.
            json!(varint(buf)? as i64)
        }
        Kind::Message(_) | Kind::MapOfString | Kind::MapOfBytes | Kind::MapOfMessage(_) => {
            return Err("a message where a scalar belongs".into())
        }
    })
}

/// Whether a singular scalar of `message` is the zero of a field JSON from Go leaves out (see
/// the module's documentation).
fn left_out(message: &Message, field: &Field, value: &Value) -> bool {
    let zero = match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    };
    zero && openapi::omitted_zeros(message.name).contains(&field.json)
}

fn is_packable(kind: Kind) -> bool {
    matches!(kind, Kind::Int | Kind::Bool)
}

fn push(out: &mut Map<String, Value>, name: &str, value: Value) {
    let items = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(items) = items {
        items.push(value);
    }
}

fn expect(wire: WireType, wanted: WireType) -> Result<(), String> {
    if wire == wanted {
        Ok(())
    } else {
        Err(format!("wire type {wire:?} where {wanted:?} belongs"))
    }
}

fn varint(buf: &mut &[u8]) -> Result<u64, String> {
    decode_varint(buf).map_err(|e| e.to_string())
}

fn take<'a>(buf: &mut &'a [u8], len: usize) -> Result<&'a [u8], String> {
    if buf.len() < len {
        return Err("the body ends inside a field".into());
    }
    let (head, rest) = buf.split_at(len);
    *buf = rest;
    Ok(head)
}

fn take_bytes<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = varint(buf)?;
    take(buf, usize::try_from(len).map_err(|_| "a field longer than memory")?)
}

/// Steps over a field this build does not know.
fn skip(wire: WireType, buf: &mut &[u8]) -> Result<(), String> {
    match wire {
        WireType::Varint => varint(buf).map(drop),
        WireType::SixtyFourBit => take(buf, 8).map(drop),
        WireType::ThirtyTwoBit => take(buf, 4).map(drop),
        WireType::LengthDelimited => take_bytes(buf).map(drop),
        WireType::StartGroup | WireType::EndGroup => {
            Err("protobuf groups are not supported".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_pb::api::authentication::v1 as authnv1;
    use k8s_pb::api::core::v1 as pb;
    use k8s_pb::api::policy::v1 as policyv1;
    use k8s_pb::api::rbac::v1 as rbacv1;
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::{DeleteOptions, LabelSelector, ObjectMeta};
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;

    fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    fn named(name: &str, namespace: &str) -> Option<ObjectMeta> {
        Some(ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        })
    }

    #[test]
    fn kubectl_create_namespace_body() {
        let hex_body = "6b3873000a0f0a0276311209 4e616d657370616365 1219 0a110a01741200 1a00 2200 2a00 3200 3800 4200 12001a020a00 1a00 2200";
        let body = hex::decode(hex_body.replace(' ', "")).unwrap();
        let obj = decode(&body).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "t"}, "spec": {},
                "status": {}})
        );
    }

    #[test]
    fn configmap_body() {
        let cm = pb::ConfigMap {
            metadata: Some(ObjectMeta {
                labels: BTreeMap::from([("app".into(), "x".into())]),
                ..named("c", "default").unwrap()
            }),
            data: BTreeMap::from([("k".into(), "v".into())]),
            binary_data: BTreeMap::from([("b".into(), b"hi".to_vec())]),
            immutable: None,
        };
        let obj = decode(&wrap("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "c", "namespace": "default", "labels": {"app": "x"}},
                   "data": {"k": "v"}, "binaryData": {"b": "aGk="}})
        );
    }

    #[test]
    fn secret_body() {
        let secret = pb::Secret {
            metadata: named("s", "ns1"),
            data: BTreeMap::from([("password".into(), b"secret".to_vec())]),
            string_data: BTreeMap::from([("user".into(), "admin".into())]),
            r#type: Some("Opaque".into()),
            immutable: None,
        };
        let obj = decode(&wrap("v1", "Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s", "namespace": "ns1"},
                   "data": {"password": "c2VjcmV0"}, "stringData": {"user": "admin"}, "type": "Opaque"})
        );
    }

    #[test]
    fn resource_quota_body() {
        let quantity = |q: &str| Quantity { string: Some(q.into()) };
        let quota = pb::ResourceQuota {
            metadata: named("q", "ns1"),
            spec: Some(pb::ResourceQuotaSpec {
                hard: BTreeMap::from([
                    ("pods".into(), quantity("10")),
                    ("requests.cpu".into(), quantity("2")),
                ]),
                scopes: vec!["BestEffort".into()],
                scope_selector: Some(pb::ScopeSelector {
                    match_expressions: vec![pb::ScopedResourceSelectorRequirement {
                        scope_name: Some("PriorityClass".into()),
                        operator: Some("In".into()),
                        values: vec!["high".into()],
                    }],
                }),
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "ResourceQuota", quota.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "ResourceQuota", "apiVersion": "v1",
                   "metadata": {"name": "q", "namespace": "ns1"},
                   "spec": {"hard": {"pods": "10", "requests.cpu": "2"}, "scopes": ["BestEffort"],
                            "scopeSelector": {"matchExpressions": [
                                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}})
        );
    }

    #[test]
    fn service_body() {
        let svc = pb::Service {
            metadata: named("web", "default"),
            spec: Some(pb::ServiceSpec {
                ports: vec![
                    pb::ServicePort {
                        name: Some("80-8080".into()),
                        protocol: Some("TCP".into()),
                        port: Some(80),
                        target_port: Some(IntOrString {
                            r#type: Some(0),
                            int_val: Some(8080),
                            str_val: None,
                        }),
                        // Go's protobuf writes the zero of a field that is not a pointer.
                        node_port: Some(0),
                        ..Default::default()
                    },
                    pb::ServicePort {
                        port: Some(443),
                        target_port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: None,
                            str_val: Some("https".into()),
                        }),
                        node_port: Some(30443),
                        ..Default::default()
                    },
                ],
                selector: BTreeMap::from([("app".into(), "web".into())]),
                r#type: Some("NodePort".into()),
                cluster_ip: Some(String::new()),
                session_affinity: Some("None".into()),
                publish_not_ready_addresses: Some(false),
                ..Default::default()
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "Service", svc.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                                      {"port": 443, "targetPort": "https", "nodePort": 30443}],
                            "selector": {"app": "web"}, "type": "NodePort", "sessionAffinity": "None"}})
        );
    }

    #[test]
    fn eviction_and_disruption_budget_bodies() {
        use k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let eviction = policyv1::Eviction {
            metadata: named("web-1", "default"),
            delete_options: Some(DeleteOptions {
                grace_period_seconds: Some(5),
                ..Default::default()
            }),
        };
        let obj = decode(&wrap("policy/v1", "Eviction", eviction.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Eviction", "apiVersion": "policy/v1",
                "metadata": {"name": "web-1", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 5}})
        );
        let budget = policyv1::PodDisruptionBudget {
            metadata: named("web", "default"),
            spec: Some(policyv1::PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString {
                    r#type: Some(1),
                    int_val: None,
                    str_val: Some("25%".into()),
                }),
                selector: Some(LabelSelector {
                    match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                    match_expressions: vec![LabelSelectorRequirement {
                        key: Some("tier".into()),
                        operator: Some("Exists".into()),
                        values: vec![],
                    }],
                }),
                ..Default::default()
            }),
            status: None,
        };
        let obj =
            decode(&wrap("policy/v1", "PodDisruptionBudget", budget.encode_to_vec())).unwrap();
        assert_eq!(
            obj["spec"],
            json!({"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}]}})
        );
    }

    #[test]
    fn delete_options_body() {
        use k8s_pb::apimachinery::pkg::apis::meta::v1::Preconditions;
        let options = DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some("u1".into()), resource_version: None }),
            propagation_policy: Some("Foreground".into()),
            dry_run: vec!["All".into()],
            ..Default::default()
        };
        let obj = decode(&wrap("v1", "DeleteOptions", options.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                   "preconditions": {"uid": "u1"}, "propagationPolicy": "Foreground",
                   "dryRun": ["All"]})
        );
    }

    #[test]
    fn service_account_and_pod_bodies() {
        let sa = pb::ServiceAccount { metadata: named("sa", "default"), ..Default::default() };
        let obj = decode(&wrap("v1", "ServiceAccount", sa.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": "sa", "namespace": "default"}})
        );

        let pod = pb::Pod {
            metadata: Some(ObjectMeta {
                labels: BTreeMap::from([("run".into(), "p".into())]),
                ..named("p", "default").unwrap()
            }),
            spec: Some(pb::PodSpec {
                containers: vec![pb::Container {
                    name: Some("p".into()),
                    image: Some("nginx".into()),
                    ports: vec![pb::ContainerPort {
                        container_port: Some(80),
                        // Zeros of `omitempty` fields, left out as JSON from Go leaves them.
                        host_port: Some(0),
                        protocol: Some(String::new()),
                        ..Default::default()
                    }],
                    resources: Some(pb::ResourceRequirements::default()),
                    ..Default::default()
                }],
                restart_policy: Some("Always".into()),
                dns_policy: Some("ClusterFirst".into()),
                ..Default::default()
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "Pod", pod.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "p", "namespace": "default", "labels": {"run": "p"}},
                   "spec": {"containers": [{"name": "p", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}],
                            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}})
        );
    }

    /// What `kubectl debug --copy-to` sends: a copy of a whole pod, with the kinds of field a
    /// hand-written conversion forgets (volumes, embedded structs, probes, pointer zeros).
    #[test]
    fn a_whole_pod_keeps_every_field() {
        use k8s_pb::apimachinery::pkg::apis::meta::v1::Time;
        let pod = pb::Pod {
            metadata: Some(ObjectMeta {
                creation_timestamp: Some(Time { seconds: Some(1_700_000_000), nanos: Some(0) }),
                generation: Some(0),
                ..named("rich", "default").unwrap()
            }),
            spec: Some(pb::PodSpec {
                volumes: vec![pb::Volume {
                    name: Some("v".into()),
                    volume_source: Some(pb::VolumeSource {
                        empty_dir: Some(pb::EmptyDirVolumeSource::default()),
                        ..Default::default()
                    }),
                }],
                containers: vec![pb::Container {
                    name: Some("c".into()),
                    image: Some("kplane/pause".into()),
                    env: vec![pb::EnvVar {
                        name: Some("CM".into()),
                        value: Some(String::new()),
                        value_from: Some(pb::EnvVarSource {
                            config_map_key_ref: Some(pb::ConfigMapKeySelector {
                                local_object_reference: Some(pb::LocalObjectReference {
                                    name: Some("settings".into()),
                                }),
                                key: Some("k".into()),
                                optional: Some(false),
                            }),
                            ..Default::default()
                        }),
                    }],
                    ports: vec![pb::ContainerPort {
                        container_port: Some(80),
                        host_port: Some(0),
                        ..Default::default()
                    }],
                    volume_mounts: vec![pb::VolumeMount {
                        name: Some("v".into()),
                        mount_path: Some("/data".into()),
                        read_only: Some(false),
                        ..Default::default()
                    }],
                    readiness_probe: Some(pb::Probe {
                        handler: Some(pb::ProbeHandler {
                            exec: Some(pb::ExecAction { command: vec!["true".into()] }),
                            ..Default::default()
                        }),
                        period_seconds: Some(0),
                        ..Default::default()
                    }),
                    security_context: Some(pb::SecurityContext {
                        run_as_user: Some(0),
                        allow_privilege_escalation: Some(false),
                        ..Default::default()
                    }),
                    stdin: Some(false),
                    ..Default::default()
                }],
                tolerations: vec![pb::Toleration {
                    key: Some("foo".into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoSchedule".into()),
                    ..Default::default()
                }],
                host_pid: Some(true),
                termination_grace_period_seconds: Some(0),
                node_selector: BTreeMap::from([("zone".into(), "a".into())]),
                ..Default::default()
            }),
            status: None,
        };
        let obj = decode(&wrap("v1", "Pod", pod.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "rich", "namespace": "default",
                    "creationTimestamp": "2023-11-14T22:13:20Z"},
                "spec": {
                    "volumes": [{"name": "v", "emptyDir": {}}],
                    "containers": [{"name": "c", "image": "kplane/pause",
                        "env": [{"name": "CM", "valueFrom": {"configMapKeyRef":
                            {"name": "settings", "key": "k", "optional": false}}}],
                        "ports": [{"containerPort": 80}],
                        "volumeMounts": [{"name": "v", "mountPath": "/data"}],
                        "readinessProbe": {"exec": {"command": ["true"]}},
                        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false}}],
                    "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
                    "hostPID": true,
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {"zone": "a"}}})
        );
    }

    #[test]
    fn an_aggregating_role_and_a_bound_token_request_keep_their_rules() {
        let role = rbacv1::ClusterRole {
            metadata: named("agg", ""),
            rules: vec![],
            aggregation_rule: Some(rbacv1::AggregationRule {
                cluster_role_selectors: vec![LabelSelector {
                    match_labels: BTreeMap::from([("foo".into(), "bar".into())]),
                    match_expressions: vec![],
                }],
            }),
        };
        let obj =
            decode(&wrap("rbac.authorization.k8s.io/v1", "ClusterRole", role.encode_to_vec()))
                .unwrap();
        assert_eq!(
            obj["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"foo": "bar"}}]})
        );
        let request = authnv1::TokenRequest {
            metadata: named("default", "default"),
            spec: Some(authnv1::TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(600),
                bound_object_ref: Some(authnv1::BoundObjectReference {
                    kind: Some("Pod".into()),
                    api_version: Some("v1".into()),
                    name: Some("web".into()),
                    u_id: Some("u1".into()),
                }),
            }),
            status: None,
        };
        let obj =
            decode(&wrap("authentication.k8s.io/v1", "TokenRequest", request.encode_to_vec()))
                .unwrap();
        assert_eq!(
            obj["spec"],
            json!({"expirationSeconds": 600, "boundObjectRef":
                {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "u1"}})
        );
    }

    #[test]
    fn a_users_extra_values_are_lists() {
        use k8s_pb::api::authorization::v1 as authzv1;
        let review = authzv1::SubjectAccessReview {
            metadata: None,
            spec: Some(authzv1::SubjectAccessReviewSpec {
                user: Some("u".into()),
                extra: BTreeMap::from([(
                    "scope".to_string(),
                    authzv1::ExtraValue { items: vec!["x".into()] },
                )]),
                ..Default::default()
            }),
            status: None,
        };
        let body = wrap("authorization.k8s.io/v1", "SubjectAccessReview", review.encode_to_vec());
        let obj = decode(&body).unwrap();
        assert_eq!(obj["spec"]["extra"], json!({"scope": ["x"]}));
    }

    #[test]
    fn wire_forms_go_writes_are_read() {
        // A packed repeated varint (`supplementalGroups`), as another writer may send it.
        let context = [0x22, 0x04, 0x01, 0x02, 0x96, 0x01];
        let spec = wire_field(14, &context);
        let raw = wire_field(2, &spec);
        let obj = decode(&wrap("v1", "Pod", raw)).unwrap();
        assert_eq!(obj["spec"]["securityContext"]["supplementalGroups"], json!([1, 2, 150]));
        // A negative int32, sign-extended to ten bytes, as Go writes it.
        let probe = [0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let container = [wire_field(1, b"c"), wire_field(10, &probe)].concat();
        let raw = wire_field(2, &wire_field(2, &container));
        let obj = decode(&wrap("v1", "Pod", raw)).unwrap();
        assert_eq!(obj["spec"]["containers"][0]["livenessProbe"]["initialDelaySeconds"], json!(-1));
    }

    /// One length-delimited field: its key, its length, its bytes.
    fn wire_field(tag: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![tag << 3 | 2];
        prost::encoding::encode_varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(decode(b"").is_err());
        assert!(decode(b"{\"kind\":\"Namespace\"}").is_err());
        assert!(decode(b"k8s\0\xff\xff\xff\xff\xff").is_err());
        assert!(decode(&wrap("v1", "Namespace", vec![0x0a, 0xff, 0x01])).is_err());
        let err = decode(&wrap("apps/v1", "Deployment", vec![])).unwrap_err();
        assert!(err.contains("Deployment"), "{err}");
        // Arbitrary byte soup never panics.
        for seed in 0u32..2000 {
            let mut bytes = MAGIC.to_vec();
            let mut x = seed.wrapping_mul(2654435761).wrapping_add(7);
            for _ in 0..(seed % 64) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                bytes.push((x & 0xff) as u8);
            }
            let _ = decode(&bytes);
            let _ = decode(&wrap("v1", "Service", bytes[4..].to_vec()));
        }
    }
}

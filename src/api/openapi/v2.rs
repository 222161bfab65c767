//! `/openapi/v2`: the component schemas as an OpenAPI 2.0 (Swagger) document, in JSON or in
//! the protobuf form kubectl asks for (gnostic's `openapi.v2.Document`).
//!
//! kubectl validates most files on the server (the v3 documents declare `fieldValidation`),
//! but not a `kind: List` (what `kubectl get -o yaml` writes for several objects): it checks
//! each item itself, against the definition tagged with the item's group-version-kind in this
//! document. So the document carries every definition, and no operations (`paths` is empty:
//! the v3 documents describe those).

use bytes::Bytes;
use prost::Message;
use serde_json::{json, Map, Value};

use super::REF_PREFIX;

/// Where a v2 reference points.
const V2_REF_PREFIX: &str = "#/definitions/";

/// The document, built once from the v3 component schemas.
pub(super) struct V2Document {
    pub(super) json: Bytes,
    pub(super) protobuf: Bytes,
}

impl V2Document {
    pub(super) fn build(schemas: &Map<String, Value>, version: &str) -> Self {
        let definitions = v2_schemas(schemas);
        let protobuf = pb::Document {
            swagger: "2.0".into(),
            info: Some(pb::Info { title: "Kubernetes".into(), version: version.into() }),
            paths: Some(pb::Paths::default()),
            definitions: Some(pb::Definitions {
                additional_properties: named_schemas(&definitions),
            }),
        };
        let json = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": version},
            "paths": {},
            "definitions": definitions,
        });
        V2Document {
            json: serde_json::to_vec(&json).unwrap_or_default().into(),
            protobuf: protobuf.encode_to_vec().into(),
        }
    }
}

/// A v3 schema in v2 form: references point at `#/definitions/`, and a property that is an
/// `allOf` of one reference (how v3 puts a description beside a reference) is that reference
/// with the description, as v2 documents write it.
fn v2_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(fields) => {
            let mut out = Map::with_capacity(fields.len());
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("$ref", Value::String(target)) => {
                        let name = target.strip_prefix(REF_PREFIX).unwrap_or(target);
                        out.insert(key.clone(), json!(format!("{V2_REF_PREFIX}{name}")));
                    }
                    ("allOf", Value::Array(members))
                        if members.len() == 1 && members[0].get("$ref").is_some() =>
                    {
                        if let Value::Object(member) = v2_schema(&members[0]) {
                            out.extend(member);
                        }
                    }
                    // Property names are not keywords: a property called `$ref` stays one.
                    ("properties", Value::Object(properties)) => {
                        out.insert(key.clone(), Value::Object(v2_schemas(properties)));
                    }
                    _ => {
                        out.insert(key.clone(), v2_schema(value));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(v2_schema).collect()),
        other => other.clone(),
    }
}

/// Named schemas (definitions, properties) in v2 form.
fn v2_schemas(schemas: &Map<String, Value>) -> Map<String, Value> {
    schemas.iter().map(|(name, schema)| (name.clone(), v2_schema(schema))).collect()
}

/// Named v2 schemas as gnostic's ordered (name, schema) pairs.
fn named_schemas(schemas: &Map<String, Value>) -> Vec<pb::NamedSchema> {
    let named = |(name, schema): (&String, &Value)| pb::NamedSchema {
        name: name.clone(),
        value: Some(pb_schema(schema)),
    };
    schemas.iter().map(named).collect()
}

/// A v2 schema as gnostic's protobuf message: what kubectl's validation reads (types,
/// formats, properties, required fields, items, map values, references, descriptions and the
/// `x-` extensions, as YAML text).
fn pb_schema(schema: &Value) -> pb::Schema {
    let text = |key: &str| schema.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let strings = |key: &str| -> Vec<String> {
        let values = schema.get(key).and_then(Value::as_array).into_iter().flatten();
        values.filter_map(|v| v.as_str().map(String::from)).collect()
    };
    let additional_properties = schema.get("additionalProperties").and_then(|values| {
        let one = match values {
            Value::Bool(allowed) => pb::additional::Oneof::Boolean(*allowed),
            Value::Object(_) => pb::additional::Oneof::Schema(Box::new(pb_schema(values))),
            _ => return None,
        };
        Some(pb::AdditionalPropertiesItem { oneof: Some(one) })
    });
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| pb::Properties { additional_properties: named_schemas(properties) });
    let vendor_extension = schema
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with("x-"))
        .map(|(key, value)| pb::NamedAny {
            name: key.clone(),
            value: Some(pb::Any { yaml: serde_yaml::to_string(value).unwrap_or_default() }),
        })
        .collect();
    pb::Schema {
        reference: text("$ref"),
        format: text("format"),
        description: text("description"),
        required: strings("required"),
        additional_properties,
        r#type: schema
            .get("type")
            .and_then(Value::as_str)
            .map(|t| pb::TypeItem { value: vec![t.to_string()] }),
        items: schema
            .get("items")
            .filter(|i| i.is_object())
            .map(|items| pb::ItemsItem { schema: vec![pb_schema(items)] }),
        all_of: schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(|members| members.iter().map(pb_schema).collect())
            .unwrap_or_default(),
        properties,
        vendor_extension,
    }
}

/// The part of gnostic's `openapi.v2` protobuf messages this document uses, with that
/// schema's field numbers.
mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Document {
        #[prost(string, tag = "1")]
        pub swagger: String,
        #[prost(message, optional, tag = "2")]
        pub info: Option<Info>,
        #[prost(message, optional, tag = "8")]
        pub paths: Option<Paths>,
        #[prost(message, optional, tag = "9")]
        pub definitions: Option<Definitions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub title: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Paths {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Definitions {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedSchema {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Schema {
        #[prost(string, tag = "1")]
        pub reference: String,
        #[prost(string, tag = "2")]
        pub format: String,
        #[prost(string, tag = "4")]
        pub description: String,
        #[prost(string, repeated, tag = "19")]
        pub required: Vec<String>,
        #[prost(message, optional, tag = "21")]
        pub additional_properties: Option<AdditionalPropertiesItem>,
        #[prost(message, optional, tag = "22")]
        pub r#type: Option<TypeItem>,
        #[prost(message, optional, tag = "23")]
        pub items: Option<ItemsItem>,
        #[prost(message, repeated, tag = "24")]
        pub all_of: Vec<Schema>,
        #[prost(message, optional, tag = "25")]
        pub properties: Option<Properties>,
        #[prost(message, repeated, tag = "31")]
        pub vendor_extension: Vec<NamedAny>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AdditionalPropertiesItem {
        #[prost(oneof = "additional::Oneof", tags = "1, 2")]
        pub oneof: Option<additional::Oneof>,
    }

    pub mod additional {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Oneof {
            #[prost(message, tag = "1")]
            Schema(Box<super::Schema>),
            #[prost(bool, tag = "2")]
            Boolean(bool),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeItem {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ItemsItem {
        #[prost(message, repeated, tag = "1")]
        pub schema: Vec<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Properties {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedAny {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Any>,
    }

    /// gnostic's `Any`: a value as YAML text (its field 1, a protobuf `Any`, is not used).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "2")]
        pub yaml: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemas() -> Map<String, Value> {
        let schemas = json!({
            "io.k8s.api.core.v1.ConfigMap": {
                "type": "object",
                "required": ["data"],
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/meta.ObjectMeta"}],
                        "description": "Standard object's metadata."},
                    "data": {"type": "object", "additionalProperties": {"type": "string"}},
                    "binaryData": {"type": "object",
                        "additionalProperties": {"type": "string", "format": "byte"}},
                    "items": {"type": "array", "items": {"$ref": "#/components/schemas/meta.ObjectMeta"}},
                    "any": {"additionalProperties": true}
                },
                "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}]
            },
            "meta.ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}}
        });
        schemas.as_object().unwrap().clone()
    }

    #[test]
    fn references_point_at_definitions_and_single_reference_all_ofs_become_references() {
        let document = V2Document::build(&schemas(), "v1.32.0");
        let json: Value = serde_json::from_slice(&document.json).unwrap();
        assert_eq!(json["swagger"], "2.0");
        assert_eq!(json["info"]["version"], "v1.32.0");
        let config_map = &json["definitions"]["io.k8s.api.core.v1.ConfigMap"];
        assert_eq!(
            config_map["properties"]["metadata"],
            json!({"$ref": "#/definitions/meta.ObjectMeta", "description": "Standard object's metadata."})
        );
        assert_eq!(
            config_map["properties"]["items"]["items"]["$ref"],
            "#/definitions/meta.ObjectMeta"
        );
        assert!(!String::from_utf8_lossy(&document.json).contains("#/components/"));
    }

    #[test]
    fn the_protobuf_form_carries_types_properties_references_and_extensions() {
        let document = V2Document::build(&schemas(), "v1.32.0");
        let decoded = pb::Document::decode(document.protobuf.as_ref()).unwrap();
        assert_eq!(decoded.swagger, "2.0");
        let definitions = decoded.definitions.unwrap().additional_properties;
        let named = |name: &str| {
            definitions.iter().find(|d| d.name == name).and_then(|d| d.value.clone()).unwrap()
        };
        let config_map = named("io.k8s.api.core.v1.ConfigMap");
        assert_eq!(config_map.r#type.unwrap().value, vec!["object"]);
        assert_eq!(config_map.required, vec!["data"]);
        let gvk = &config_map.vendor_extension[0];
        assert_eq!(gvk.name, "x-kubernetes-group-version-kind");
        let yaml: Value = serde_yaml::from_str(&gvk.value.as_ref().unwrap().yaml).unwrap();
        assert_eq!(yaml, json!([{"group": "", "version": "v1", "kind": "ConfigMap"}]));
        let properties = config_map.properties.unwrap().additional_properties;
        let property = |name: &str| {
            properties.iter().find(|p| p.name == name).and_then(|p| p.value.clone()).unwrap()
        };
        assert_eq!(property("metadata").reference, "#/definitions/meta.ObjectMeta");
        assert_eq!(property("metadata").description, "Standard object's metadata.");
        let Some(pb::additional::Oneof::Schema(values)) =
            property("binaryData").additional_properties.unwrap().oneof
        else {
            panic!("map values have a schema")
        };
        assert_eq!(
            (values.r#type.unwrap().value, values.format),
            (vec!["string".into()], "byte".into())
        );
        assert_eq!(
            property("any").additional_properties.unwrap().oneof,
            Some(pb::additional::Oneof::Boolean(true))
        );
        assert_eq!(
            property("items").items.unwrap().schema[0].reference,
            "#/definitions/meta.ObjectMeta"
        );
        assert_eq!(
            named("meta.ObjectMeta").properties.unwrap().additional_properties[0].name,
            "name"
        );
    }
}

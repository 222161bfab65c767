//! The component schemas compiled for the unknown-field check: each schema with its `$ref`
//! and `allOf` parts resolved once, at start-up, into what the check asks of it. The check then
//! walks an object without looking anything up by name or hashing schema keywords.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use kplane_actors::model::text;
use serde_json::{Map, Value};

use super::{Unknown, REF_PREFIX};

type ShapeId = usize;

/// What a schema declares, as far as unknown fields go.
#[derive(Debug, Default)]
struct Shape {
    /// `x-kubernetes-preserve-unknown-fields` or int-or-string: anything goes.
    anything: bool,
    /// The declared properties (the first part declaring a name wins); `None` when no part
    /// has `properties` at all.
    properties: Option<BTreeMap<String, ShapeId>>,
    additional: Additional,
    /// The schema of array items.
    items: Option<ShapeId>,
}

/// `additionalProperties`, as the first part that has it says.
#[derive(Debug, Default)]
enum Additional {
    /// Absent, `false`, or anything else that declares no field.
    #[default]
    Undeclared,
    /// `true`: any field, unchecked.
    Any,
    /// A schema for every undeclared field (a map's values).
    Schema(ShapeId),
}

/// The compiled schemas of every kind.
#[derive(Debug, Default)]
pub(super) struct Shapes {
    shapes: Vec<Shape>,
    kinds: Vec<((String, String), ShapeId)>,
}

impl Shapes {
    /// Compiles the schema of each `(group, kind)` in `kinds` (names into `schemas`).
    pub(super) fn compile(
        schemas: &Map<String, Value>,
        kinds: &HashMap<(String, String), String>,
    ) -> Shapes {
        let mut compiler = Compiler { schemas, shapes: Vec::new(), seen: HashMap::new() };
        let kinds = kinds
            .iter()
            .filter_map(|(kind, name)| Some((kind.clone(), compiler.shape(schemas.get(name)?))))
            .collect();
        Shapes { shapes: compiler.shapes, kinds }
    }

    /// The fields of `object` the schema of `kind` in `group` does not declare, as paths; with
    /// [`Unknown::Drop`] also removed. Nothing for a kind without a schema.
    pub(super) fn unknown_fields(
        &self,
        group: &str,
        kind: &str,
        object: &mut Value,
        unknown: Unknown,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let found = self.kinds.iter().find(|((g, k), _)| k == kind && text::same(g, group));
        if let Some((_, id)) = found {
            self.walk(*id, object, &mut String::new(), &mut out, unknown);
        }
        out
    }

    /// Walks `value` against shape `id`; `path` is where `value` is (one buffer, extended and
    /// cut back as the walk goes, so that only unknown fields cost an allocation).
    fn walk(
        &self,
        id: ShapeId,
        value: &mut Value,
        path: &mut String,
        out: &mut Vec<String>,
        unknown: Unknown,
    ) {
        let shape = &self.shapes[id];
        if shape.anything {
            return;
        }
        let at = path.len();
        match value {
            Value::Object(fields) => {
                let Some(properties) = &shape.properties else {
                    if let Additional::Schema(values) = shape.additional {
                        for (k, v) in fields.iter_mut() {
                            path.push('.');
                            path.push_str(k);
                            self.walk(values, v, path, out, unknown);
                            path.truncate(at);
                        }
                    }
                    return;
                };
                let mut undeclared = Vec::new();
                for (k, v) in fields.iter_mut() {
                    path.push('.');
                    path.push_str(k);
                    match (properties.get(k.as_str()), &shape.additional) {
                        (Some(declared), _) | (None, Additional::Schema(declared)) => {
                            self.walk(*declared, v, path, out, unknown)
                        }
                        (None, Additional::Any) => {}
                        (None, Additional::Undeclared) => {
                            out.push(path.clone());
                            undeclared.push(k.clone());
                        }
                    }
                    path.truncate(at);
                }
                if unknown == Unknown::Drop {
                    for k in undeclared {
                        fields.remove(&k);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = shape.items {
                    for (i, v) in items.iter_mut().enumerate() {
                        let _ = write!(path, "[{i}]");
                        self.walk(item, v, path, out, unknown);
                        path.truncate(at);
                    }
                }
            }
            _ => {}
        }
    }
}

struct Compiler<'a> {
    schemas: &'a Map<String, Value>,
    shapes: Vec<Shape>,
    /// Schemas compiled (or being compiled: recursive types refer to themselves), by address.
    seen: HashMap<*const Value, ShapeId>,
}

impl<'a> Compiler<'a> {
    fn shape(&mut self, schema: &'a Value) -> ShapeId {
        if let Some(id) = self.seen.get(&std::ptr::from_ref(schema)) {
            return *id;
        }
        let id = self.shapes.len();
        self.shapes.push(Shape::default());
        self.seen.insert(std::ptr::from_ref(schema), id);
        let mut parts = Vec::new();
        self.effective(schema, &mut parts, 0);
        let flag = |s: &Value, name: &str| s.get(name) == Some(&Value::Bool(true));
        let anything = parts.iter().any(|s| {
            flag(s, "x-kubernetes-preserve-unknown-fields") || flag(s, "x-kubernetes-int-or-string")
        });
        let mut shape = Shape { anything, ..Shape::default() };
        if !anything {
            let mut declared_any = false;
            let mut properties = BTreeMap::new();
            for declared in parts.iter().filter_map(|s| s.get("properties")?.as_object()) {
                declared_any = true;
                for (name, property) in declared {
                    if !properties.contains_key(name) {
                        let property = self.shape(property);
                        properties.insert(name.clone(), property);
                    }
                }
            }
            shape.properties = declared_any.then_some(properties);
            shape.additional = match parts.iter().find_map(|s| s.get("additionalProperties")) {
                Some(Value::Bool(true)) => Additional::Any,
                Some(values @ Value::Object(_)) => Additional::Schema(self.shape(values)),
                _ => Additional::Undeclared,
            };
            let items = parts.iter().find_map(|s| s.get("items")).filter(|i| i.is_object());
            shape.items = items.map(|items| self.shape(items));
        }
        self.shapes[id] = shape;
        id
    }

    /// Flattens `schema` into the schemas it stands for: itself, its `$ref` target and its
    /// `allOf` members, recursively.
    fn effective(&self, schema: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
        if depth > 32 {
            return;
        }
        out.push(schema);
        let target =
            schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX));
        if let Some(target) = target.and_then(|name| self.schemas.get(name)) {
            self.effective(target, out, depth + 1);
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for member in all {
                self.effective(member, out, depth + 1);
            }
        }
    }
}

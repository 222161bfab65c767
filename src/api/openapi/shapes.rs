//! The component schemas compiled for the decode check: each schema with its `$ref` and
//! `allOf` parts resolved once, at start-up, into what the check asks of it. The check then
//! walks an object without looking anything up by name or hashing schema keywords.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use base64::Engine as _;
use chrono::SecondsFormat;
use kplane_actors::model::{quantity, text, QuantityError};
use serde_json::{Map, Value};

use super::{Empty, Unknown, REF_PREFIX};

type ShapeId = usize;

/// Schema name of `resource.Quantity`, which decodes from a string or any number.
const QUANTITY_SCHEMA: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
/// Schema name of `metav1.MicroTime`, written with microseconds where `metav1.Time` has none.
const MICRO_TIME_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";

/// The JSON a schema's Go type decodes from: anything else makes Kubernetes' decoder refuse
/// the body. `null` decodes into every type (as its zero value).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Admits {
    /// An untyped schema (`RawExtension`, `FieldsV1`) or preserved unknown fields.
    #[default]
    Anything,
    Object,
    Array,
    String,
    /// Base64 text (`format: byte`, Go's `[]byte`).
    Bytes,
    /// RFC 3339 text (`format: date-time`, `metav1.Time`), kept in UTC to the second.
    Time,
    /// RFC 3339 text (`metav1.MicroTime`), kept in UTC to the microsecond.
    MicroTime,
    Boolean,
    Int32,
    Int64,
    Number,
    /// A string or an int32 (`intstr.IntOrString`).
    IntOrString,
    /// A quantity's text or any number (`resource.Quantity`), kept in its canonical text.
    Quantity,
}

/// What a schema declares, as far as decoding and unknown fields go.
#[derive(Debug, Default)]
struct Shape {
    /// `x-kubernetes-preserve-unknown-fields` or int-or-string: any field goes.
    anything: bool,
    admits: Admits,
    /// The Go type, as the decoder names it in its errors (`v1.PodSpec`, `[]string`).
    go_type: String,
    /// For a struct: its Go name (`PodSpec`), which a type error in its fields names.
    struct_name: String,
    /// The declared properties (the first part declaring a name wins); `None` when no part
    /// has `properties` at all.
    properties: Option<BTreeMap<String, ShapeId>>,
    /// The properties the schema requires: Go fields without `omitempty`, which keep an empty
    /// value where the others are left out.
    required: Vec<String>,
    /// The properties whose zero Go leaves out (see [`super::omitted_zeros`]).
    omitted_zeros: &'static [&'static str],
    /// The required scalar properties, with their zero: Go decodes a missing field as its
    /// zero and writes it back (no `omitempty`), so a pod condition written without `status`
    /// reads back with `status: ""`, a container status without `ready` with `ready: false`.
    /// Clients that check required fields (the Python client's models) could not read the
    /// object, nor any list or watch holding it, without them.
    required_zeros: Vec<(String, Value)>,
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
            .filter_map(|(kind, name)| {
                Some((kind.clone(), compiler.shape(schemas.get(name)?, Some(name))))
            })
            .collect();
        Shapes { shapes: compiler.shapes, kinds }
    }

    /// Checks `object` as Kubernetes decodes it into the Go type of `kind` in `group`: a value
    /// of a type the schema does not admit is an error, worded as the decoder words it. Returns
    /// the fields the schema does not declare, as paths; with [`Unknown::Drop`] also removes
    /// them. Nothing is checked for a kind without a schema.
    pub(super) fn check(
        &self,
        group: &str,
        kind: &str,
        object: &mut Value,
        unknown: Unknown,
        empty: Empty,
    ) -> Result<Vec<String>, String> {
        let found = self.kinds.iter().find(|((g, k), _)| k == kind && text::same(g, group));
        let Some((_, id)) = found else { return Ok(Vec::new()) };
        let mut walk = Walk {
            shapes: self,
            unknown,
            empty,
            path: String::new(),
            go_path: String::new(),
            found: Vec::new(),
        };
        walk.value(*id, object, &self.shapes[*id].struct_name)?;
        Ok(walk.found)
    }
}

/// The times of the served kinds that are pointers in Go (`*metav1.Time`), which a `null`
/// leaves out; the others are values, written `null` when zero.
const POINTER_TIMES: &[&str] =
    &["deletionTimestamp", "startTime", "acquireTime", "renewTime", "time"];

/// Optional fields of the served kinds that Go writes even when empty (no `omitempty`): a
/// node image's `names`, and the `apiGroup` of a claim's `dataSource` and `dataSourceRef`.
const WRITTEN_EMPTY: &[&str] = &["names", "apiGroup"];

impl Shapes {
    /// Whether a declared field's `value` is left out of the object, as Go's encoder leaves
    /// out an `omitempty` field once decoded: `null` (a nil pointer, list or map, or a zero
    /// value), an empty list or map that the schema does not require, and the zero of a scalar
    /// that is not a pointer in Go (`zero_omitted`: `hostNetwork: false`). An empty struct
    /// (`securityContext: {}`) stays, as a pointer to it does in Go, and so does a null time:
    /// a zero `metav1.Time` is written `null` (a template's `creationTimestamp: null`, a
    /// condition's `lastProbeTime: null`), unless it is one of the `POINTER_TIMES`.
    fn omits(
        &self,
        name: &str,
        property: ShapeId,
        value: &Value,
        zero_omitted: impl FnOnce() -> bool,
        required: impl FnOnce() -> bool,
    ) -> bool {
        if WRITTEN_EMPTY.contains(&name) {
            return false;
        }
        let shape = &self.shapes[property];
        let empty_collection = match value {
            Value::Null => return !shape.admits.is_time() || POINTER_TIMES.contains(&name),
            Value::Bool(false) => return shape.admits == Admits::Boolean && zero_omitted(),
            Value::String(text) => {
                return text.is_empty() && shape.admits == Admits::String && zero_omitted()
            }
            Value::Number(number) => {
                let numeric =
                    matches!(shape.admits, Admits::Int32 | Admits::Int64 | Admits::Number);
                return numeric && number.as_f64() == Some(0.0) && zero_omitted();
            }
            Value::Array(items) => items.is_empty() && shape.admits == Admits::Array,
            Value::Object(fields) => {
                fields.is_empty()
                    && shape.admits == Admits::Object
                    && shape.properties.is_none()
                    && !matches!(shape.additional, Additional::Undeclared)
            }
            _ => false,
        };
        empty_collection && !required()
    }
}

/// One check of an object: where it is, and the unknown fields found so far.
struct Walk<'s> {
    shapes: &'s Shapes,
    unknown: Unknown,
    empty: Empty,
    /// Where the walk is, as unknown fields are reported: `.spec.containers[0].name` (one
    /// buffer, extended and cut back as the walk goes, so that only unknown fields cost an
    /// allocation).
    path: String,
    /// The same place as Go's decoder names it in a type error: the field names from the
    /// root, without list indexes or map keys (`spec.containers.name`).
    go_path: String,
    found: Vec<String>,
}

impl<'s> Walk<'s> {
    /// Walks `value` against shape `id`; `owner` is the Go struct the value is a field of.
    /// Quantities and times are rewritten as Kubernetes writes them once decoded.
    fn value(&mut self, id: ShapeId, value: &mut Value, owner: &'s str) -> Result<(), String> {
        let shape = &self.shapes.shapes[id];
        if let Err(problem) =
            admits(shape.admits, value).and_then(|()| canonical(shape.admits, value))
        {
            return Err(match problem {
                Problem::Type => format!(
                    "json: cannot unmarshal {} into Go struct field {owner}.{} of type {}",
                    json_type(value, matches!(shape.admits, Admits::Int32 | Admits::Int64)),
                    self.go_path,
                    shape.go_type
                ),
                Problem::Text(message) => message,
            });
        }
        if shape.anything {
            return Ok(());
        }
        let owner = if shape.struct_name.is_empty() { owner } else { &shape.struct_name };
        let (at, go_at) = (self.path.len(), self.go_path.len());
        match value {
            Value::Object(fields) => {
                let Some(properties) = &shape.properties else {
                    if let Additional::Schema(values) = shape.additional {
                        for (k, v) in fields.iter_mut() {
                            self.null_is_zero(values, v);
                            self.path.push('.');
                            self.path.push_str(k);
                            self.value(values, v, owner)?;
                            self.path.truncate(at);
                        }
                    }
                    return Ok(());
                };
                let (mut undeclared, mut omitted) = (Vec::new(), Vec::new());
                for (k, v) in fields.iter_mut() {
                    let declared = properties.get(k.as_str());
                    let zero_omitted = || shape.omitted_zeros.contains(&k.as_str());
                    let omits = |d: &ShapeId| {
                        self.shapes.omits(k, *d, v, zero_omitted, || shape.required.contains(k))
                    };
                    // An empty `managedFields` is not left out: it asks for the entries'
                    // reset (Go decodes it as an empty list, not a nil one).
                    let reset = k == "managedFields" && v.as_array().is_some_and(Vec::is_empty);
                    if self.empty == Empty::Omit && !reset && declared.is_some_and(omits) {
                        omitted.push(k.clone());
                        continue;
                    }
                    self.path.push('.');
                    self.path.push_str(k);
                    if !self.go_path.is_empty() {
                        self.go_path.push('.');
                    }
                    self.go_path.push_str(k);
                    match (declared, &shape.additional) {
                        (Some(declared), _) => self.value(*declared, v, owner)?,
                        (None, Additional::Schema(values)) => {
                            self.null_is_zero(*values, v);
                            self.value(*values, v, owner)?
                        }
                        (None, Additional::Any) => {}
                        (None, Additional::Undeclared) => {
                            self.found.push(self.path.clone());
                            undeclared.push(k.clone());
                        }
                    }
                    self.path.truncate(at);
                    self.go_path.truncate(go_at);
                }
                if self.unknown == Unknown::Drop {
                    omitted.append(&mut undeclared);
                }
                for k in omitted {
                    fields.remove(&k);
                }
                if self.empty == Empty::Omit {
                    for (name, zero) in &shape.required_zeros {
                        if !fields.contains_key(name) {
                            fields.insert(name.clone(), zero.clone());
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = shape.items {
                    for (i, v) in items.iter_mut().enumerate() {
                        self.null_is_zero(item, v);
                        let _ = write!(self.path, "[{i}]");
                        self.value(item, v, owner)?;
                        self.path.truncate(at);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Walk<'_> {
    /// A null map value or list item decodes as Go decodes it, into its type's zero value: ""
    /// for a string (`labels: {a: null}` is the label `a=""`), 0 for a number, "0" for a
    /// quantity, false, and an empty struct (which validation then checks). A null map, list or
    /// time stays null, as Go writes a nil one. Nothing changes where empty values are kept (a
    /// server-side apply's configuration, where a null asks for the field's removal).
    fn null_is_zero(&self, id: ShapeId, value: &mut Value) {
        if !value.is_null() || self.empty == Empty::Keep {
            return;
        }
        let shape = &self.shapes.shapes[id];
        let zero = match shape.admits {
            Admits::String | Admits::Bytes => Value::String(String::new()),
            Admits::Int32 | Admits::Int64 | Admits::Number | Admits::IntOrString => Value::from(0),
            Admits::Quantity => Value::String("0".into()),
            Admits::Boolean => Value::Bool(false),
            Admits::Object if shape.properties.is_some() => Value::Object(Map::new()),
            _ => return,
        };
        *value = zero;
    }
}

/// Why a value does not decode.
enum Problem {
    /// Its JSON type is not the Go type's.
    Type,
    /// The type's own decoder refuses it, with this message.
    Text(String),
}

impl Admits {
    fn is_time(self) -> bool {
        matches!(self, Admits::Time | Admits::MicroTime)
    }
}

/// Whether a value of JSON type `value` decodes as `admits` asks.
fn admits(admits: Admits, value: &Value) -> Result<(), Problem> {
    let fits = match (admits, value) {
        (_, Value::Null) | (Admits::Anything, _) => true,
        (Admits::Object, v) => v.is_object(),
        (Admits::Array, v) => v.is_array(),
        (Admits::String, v) => v.is_string(),
        (Admits::Boolean, v) => v.is_boolean(),
        (Admits::Number, v) => v.is_number(),
        (Admits::Int64, v) => v.is_i64(),
        (Admits::Int32, v) => is_int32(v),
        (Admits::Bytes, Value::String(text)) => return base64_problem(text),
        (Admits::Time | Admits::MicroTime, Value::String(_)) => true,
        (Admits::IntOrString, v) => {
            if v.is_string() || is_int32(v) {
                return Ok(());
            }
            let json = json_type(v, true);
            return Err(Problem::Text(format!(
                "json: cannot unmarshal {json} into Go value of type int32"
            )));
        }
        (Admits::Quantity, v) => {
            if v.is_string() || v.is_number() {
                return Ok(());
            }
            return Err(Problem::Text(quantity_syntax()));
        }
        (Admits::Bytes, _) => false,
        (Admits::Time | Admits::MicroTime, v) => {
            let json = json_type(v, false);
            return Err(Problem::Text(format!(
                "json: cannot unmarshal {json} into Go value of type string"
            )));
        }
    };
    if fits {
        Ok(())
    } else {
        Err(Problem::Type)
    }
}

fn is_int32(value: &Value) -> bool {
    value.as_i64().is_some_and(|n| i32::try_from(n).is_ok())
}

/// The JSON type of `value` as Go's decoder names it in a type error: a number that does not
/// fit the integer type it was `for_integer` is named with its value (`number 1.5`).
fn json_type(value: &Value, for_integer: bool) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if for_integer => {
            format!("number {n}")
        }
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// Go decodes `[]byte` from standard, padded base64, skipping line breaks.
fn base64_problem(text: &str) -> Result<(), Problem> {
    let decoded = if text.contains(['\r', '\n']) {
        let joined: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        LENIENT_BASE64.decode(joined)
    } else {
        LENIENT_BASE64.decode(text)
    };
    decoded.map(drop).map_err(|error| {
        let at = match error {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            base64::DecodeError::InvalidLength(at) => at,
            base64::DecodeError::InvalidPadding => text.len(),
        };
        Problem::Text(format!("illegal base64 data at input byte {at}"))
    })
}

/// Standard, padded base64 that, like Go's, ignores bits left over in the last character.
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Go's message for a quantity that is not one.
fn quantity_syntax() -> String {
    "quantities must match the regular expression \
     '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        .into()
}

/// Rewrites a decoded quantity or time as Kubernetes writes it back, refusing one that does
/// not decode: a quantity in its canonical text ("1000m" -> "1", a number -> its text), a time
/// in UTC, to the second or (`MicroTime`) to the microsecond. Other values are left alone.
fn canonical(admits: Admits, value: &mut Value) -> Result<(), Problem> {
    match (admits, &*value) {
        (Admits::Quantity, Value::String(text)) => {
            if let Some(written) = canonical_quantity(text)? {
                *value = Value::String(written);
            }
        }
        (Admits::Quantity, Value::Number(n)) => {
            let text = n.to_string();
            let written = canonical_quantity(&text)?.unwrap_or(text);
            *value = Value::String(written);
        }
        (Admits::Time | Admits::MicroTime, Value::String(text)) => {
            if let Some(written) = canonical_time(text, admits == Admits::MicroTime)? {
                *value = Value::String(written);
            }
        }
        _ => {}
    }
    Ok(())
}

fn canonical_quantity(text: &str) -> Result<Option<String>, Problem> {
    quantity::canonical(text).map_err(|error| match error {
        QuantityError::Suffix => Problem::Text(error.to_string()),
        _ => Problem::Text(quantity_syntax()),
    })
}

/// `metav1.Time` and `MicroTime` decode from RFC 3339 text and are written back in UTC, to
/// the second (`2006-01-02T15:04:05Z`) or to the microsecond (`2006-01-02T15:04:05.000000Z`);
/// `None` when `text` is already so written. A `MicroTime` is taken with any number of
/// fraction digits, or none, where Kubernetes wants exactly six: clients that write times as
/// their language formats them (Python's `isoformat()` leaves out a zero fraction) work.
fn canonical_time(text: &str, micro: bool) -> Result<Option<String>, Problem> {
    let layout =
        if micro { "2006-01-02T15:04:05.000000Z07:00" } else { "2006-01-02T15:04:05Z07:00" };
    let b = text.as_bytes();
    // RFC 3339 also takes a space or a `t` between date and time and a `z` for UTC; Go's layout
    // takes neither, as Kubernetes' decoder does not.
    if b.get(10).is_some_and(|c| *c != b'T') {
        let rest = &text[text.char_indices().nth(10).map_or(text.len(), |(i, _)| i)..];
        let why = format!("cannot parse {rest:?} as \"T\"");
        return Err(Problem::Text(format!("parsing time {text:?} as {layout:?}: {why}")));
    }
    let parsed = match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(_) if text.ends_with('z') => Err("cannot parse \"z\" as \"Z07:00\"".to_string()),
        parsed => parsed.map_err(|error| error.to_string()),
    };
    let time = parsed
        .map_err(|why| Problem::Text(format!("parsing time {text:?} as {layout:?}: {why}")))?;
    let written_so = b.get(10) == Some(&b'T')
        && text.ends_with('Z')
        && if micro { b.len() == 27 && b[19] == b'.' } else { b.len() == 20 };
    if written_so {
        return Ok(None);
    }
    let precision = if micro { SecondsFormat::Micros } else { SecondsFormat::Secs };
    Ok(Some(time.with_timezone(&chrono::Utc).to_rfc3339_opts(precision, true)))
}

struct Compiler<'a> {
    schemas: &'a Map<String, Value>,
    shapes: Vec<Shape>,
    /// Schemas compiled (or being compiled: recursive types refer to themselves), by address.
    seen: HashMap<*const Value, ShapeId>,
}

impl<'a> Compiler<'a> {
    /// Compiles `schema`; `name` is its component name when it is a component itself (a
    /// schema that refers to one takes that one's name).
    fn shape(&mut self, schema: &'a Value, name: Option<&str>) -> ShapeId {
        if let Some(id) = self.seen.get(&std::ptr::from_ref(schema)) {
            return *id;
        }
        let id = self.shapes.len();
        self.shapes.push(Shape::default());
        self.seen.insert(std::ptr::from_ref(schema), id);
        let mut parts = Vec::new();
        self.effective(schema, &mut parts, 0);
        let name = name.or_else(|| {
            parts.iter().find_map(|s| s.get("$ref")?.as_str()?.strip_prefix(REF_PREFIX))
        });
        let flag = |s: &Value, name: &str| s.get(name) == Some(&Value::Bool(true));
        let preserve = parts.iter().any(|s| flag(s, "x-kubernetes-preserve-unknown-fields"));
        let int_or_string = parts.iter().any(|s| flag(s, "x-kubernetes-int-or-string"));
        let admits = if name == Some(QUANTITY_SCHEMA) {
            Admits::Quantity
        } else if name == Some(MICRO_TIME_SCHEMA) {
            Admits::MicroTime
        } else if int_or_string {
            Admits::IntOrString
        } else if preserve {
            Admits::Anything
        } else {
            declared_type(&parts)
        };
        let mut shape = Shape { anything: preserve || int_or_string, admits, ..Shape::default() };
        if !shape.anything {
            let mut declared_any = false;
            let mut properties = BTreeMap::new();
            for declared in parts.iter().filter_map(|s| s.get("properties")?.as_object()) {
                declared_any = true;
                for (name, property) in declared {
                    if !properties.contains_key(name) {
                        let property = self.shape(property, None);
                        properties.insert(name.clone(), property);
                    }
                }
            }
            shape.properties = declared_any.then_some(properties);
            shape.required = parts
                .iter()
                .filter_map(|s| s.get("required")?.as_array())
                .flatten()
                .filter_map(|name| Some(name.as_str()?.to_string()))
                .collect();
            shape.additional = match parts.iter().find_map(|s| s.get("additionalProperties")) {
                Some(Value::Bool(true)) => Additional::Any,
                Some(values @ Value::Object(_)) => Additional::Schema(self.shape(values, None)),
                _ => Additional::Undeclared,
            };
            let items = parts.iter().find_map(|s| s.get("items")).filter(|i| i.is_object());
            shape.items = items.map(|items| self.shape(items, None));
        }
        if shape.properties.is_some() {
            shape.struct_name = name.map_or("", |n| n.rsplit('.').next().unwrap_or(n)).into();
            shape.omitted_zeros = name.map_or(&[], super::omitted_zeros);
            shape.required_zeros = self.required_zeros(&shape);
        }
        shape.go_type = self.go_type(&shape, name);
        self.shapes[id] = shape;
        id
    }

    /// The required scalar properties of `shape` (a struct) whose zero Go writes, with it.
    /// (Some required ones are `omitempty` all the same: a `LocalObjectReference`'s `name`.)
    fn required_zeros(&self, shape: &Shape) -> Vec<(String, Value)> {
        let properties = shape.properties.as_ref().expect("a struct");
        let written = |name: &&String| !shape.omitted_zeros.contains(&name.as_str());
        let zero = |name: &String| {
            let zero = match self.shapes[*properties.get(name)?].admits {
                Admits::String => Value::String(String::new()),
                Admits::Int32 | Admits::Int64 => Value::from(0),
                Admits::Boolean => Value::Bool(false),
                _ => return None,
            };
            Some((name.clone(), zero))
        };
        shape.required.iter().filter(written).filter_map(zero).collect()
    }

    /// The Go type of `shape` (component `name`), as Go's decoder names it.
    fn go_type(&self, shape: &Shape, name: Option<&str>) -> String {
        let of = |id: Option<ShapeId>| id.map_or("interface {}", |id| &self.shapes[id].go_type);
        match shape.admits {
            Admits::Object if shape.properties.is_some() => {
                // `io.k8s.api.core.v1.PodSpec` is `v1.PodSpec` in Go.
                let mut segments = name.unwrap_or("struct").rsplit('.');
                match (segments.next(), segments.next()) {
                    (Some(type_name), Some(package)) => format!("{package}.{type_name}"),
                    _ => name.unwrap_or("struct").to_string(),
                }
            }
            Admits::Object => match shape.additional {
                Additional::Schema(values) => format!("map[string]{}", of(Some(values))),
                _ => "map[string]interface {}".into(),
            },
            Admits::Array => format!("[]{}", of(shape.items)),
            Admits::String => "string".into(),
            Admits::Bytes => "[]uint8".into(),
            Admits::Time => "v1.Time".into(),
            Admits::MicroTime => "v1.MicroTime".into(),
            Admits::Boolean => "bool".into(),
            Admits::Int32 => "int32".into(),
            Admits::Int64 => "int64".into(),
            Admits::Number => "float64".into(),
            Admits::IntOrString => "intstr.IntOrString".into(),
            Admits::Quantity => "resource.Quantity".into(),
            Admits::Anything => "interface {}".into(),
        }
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

/// What the first part that declares a `type` declares (with its `format`).
fn declared_type(parts: &[&Value]) -> Admits {
    let Some(part) = parts.iter().find(|s| s.get("type").is_some_and(Value::is_string)) else {
        return Admits::Anything;
    };
    let format = part.get("format").and_then(Value::as_str);
    match (part["type"].as_str(), format) {
        (Some("object"), _) => Admits::Object,
        (Some("array"), _) => Admits::Array,
        (Some("string"), Some("byte")) => Admits::Bytes,
        (Some("string"), Some("date-time")) => Admits::Time,
        (Some("string"), _) => Admits::String,
        (Some("boolean"), _) => Admits::Boolean,
        (Some("integer"), Some("int32")) => Admits::Int32,
        (Some("integer"), _) => Admits::Int64,
        (Some("number"), _) => Admits::Number,
        _ => Admits::Anything,
    }
}

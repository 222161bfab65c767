//! Label and field selectors: parsing the query-string syntax and matching objects.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::packed::PackedStrings;
use super::{json, ResourceType};

/// Why a selector string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0}")]
    Syntax(String),
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    /// `key>N` / `key<N`, as in Kubernetes' label selector grammar.
    GreaterThan(i64),
    LessThan(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LabelRequirement {
    key: String,
    op: LabelOp,
}

/// A parsed `labelSelector`: all requirements must hold. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses the string form: `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(input)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Self { requirements })
    }

    /// Builds an equality selector from a label map (an RC's `spec.selector`).
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        let requirements = map
            .iter()
            .map(|(k, v)| LabelRequirement { key: k.clone(), op: LabelOp::Equals(v.clone()) })
            .collect();
        Self { requirements }
    }

    /// Reads a `metav1.LabelSelector` object (`matchLabels` and `matchExpressions` with `In`,
    /// `NotIn`, `Exists`, `DoesNotExist`), as a PodDisruptionBudget's `spec.selector` holds
    /// it. A malformed one (which validation refuses on write) is an error naming why.
    pub fn from_object(selector: &serde_json::Value) -> Result<Self, SelectorError> {
        let bad = |what: String| SelectorError::Syntax(what);
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(|m| m.as_object()) {
            for (key, value) in labels {
                let value = value.as_str().ok_or_else(|| bad(format!("{key}: {value}")))?;
                let op = LabelOp::Equals(checked_value(value, key)?);
                requirements.push(LabelRequirement { key: checked_key(key, key)?, op });
            }
        }
        let expressions = selector.get("matchExpressions").and_then(|e| e.as_array());
        for expression in expressions.into_iter().flatten() {
            let key = expression.get("key").and_then(|k| k.as_str()).unwrap_or("");
            let key = checked_key(key, key)?;
            let values: Vec<String> = expression
                .get("values")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .map(|v| checked_value(v.as_str().unwrap_or(""), &key))
                .collect::<Result<_, _>>()?;
            let operator = expression.get("operator").and_then(|o| o.as_str()).unwrap_or("");
            let op = match operator {
                "In" if !values.is_empty() => LabelOp::In(values),
                "NotIn" if !values.is_empty() => LabelOp::NotIn(values),
                "Exists" if values.is_empty() => LabelOp::Exists,
                "DoesNotExist" if values.is_empty() => LabelOp::DoesNotExist,
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {
                    return Err(bad(format!("wrong number of values for {operator} on {key}")))
                }
                other => {
                    return Err(bad(format!("{other:?} is not a valid label selector operator")))
                }
            };
            requirements.push(LabelRequirement { key, op });
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Adds the requirement `key = value`, or `key != value` when not `equal` (a pod's
    /// `matchLabelKeys` and `mismatchLabelKeys` merged into a selector with its own values).
    pub fn require(&mut self, key: &str, value: &str, equal: bool) {
        let value = value.to_string();
        let op = if equal { LabelOp::Equals(value) } else { LabelOp::NotEquals(value) };
        self.requirements.push(LabelRequirement { key: key.to_string(), op });
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_by(|key| labels.get(key))
    }

    /// Whether labels held as a map (a typed object's) satisfy every requirement.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|key| labels.get(key).map(String::as_str))
    }

    fn matches_by<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let value = label(&r.key);
            match &r.op {
                LabelOp::Equals(v) => value == Some(v.as_str()),
                LabelOp::NotEquals(v) => value != Some(v.as_str()),
                LabelOp::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                LabelOp::NotIn(vs) => !value.is_some_and(|x| vs.iter().any(|v| v == x)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
                LabelOp::GreaterThan(n) => {
                    value.and_then(|x| x.parse::<i64>().ok()).is_some_and(|x| x > *n)
                }
                LabelOp::LessThan(n) => {
                    value.and_then(|x| x.parse::<i64>().ok()).is_some_and(|x| x < *n)
                }
            }
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| SelectorError::Syntax(format!("unbalanced ')' in {input:?}")))?
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Syntax(format!("unbalanced '(' in {input:?}")));
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<LabelRequirement, SelectorError> {
    let syntax = || SelectorError::Syntax(format!("{part:?}"));
    if let Some(key) = part.strip_prefix('!') {
        let key = checked_key(key.trim(), part)?;
        return Ok(LabelRequirement { key, op: LabelOp::DoesNotExist });
    }
    for (token, is_in) in [(" notin ", false), (" in ", true)] {
        if let Some(pos) = part.find(token) {
            let key = checked_key(part[..pos].trim(), part)?;
            let set = part[pos + token.len()..].trim();
            let inner =
                set.strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(syntax)?;
            let values = inner
                .split(',')
                .map(|v| checked_value(v.trim(), part))
                .collect::<Result<Vec<_>, _>>()?;
            let op = if is_in { LabelOp::In(values) } else { LabelOp::NotIn(values) };
            return Ok(LabelRequirement { key, op });
        }
    }
    for (token, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some(pos) = part.find(token) {
            let key = checked_key(part[..pos].trim(), part)?;
            let raw = part[pos + token.len()..].trim();
            let op = match kind {
                0 => LabelOp::NotEquals(checked_value(raw, part)?),
                1 => LabelOp::Equals(checked_value(raw, part)?),
                2 => LabelOp::GreaterThan(raw.parse().map_err(|_| syntax())?),
                _ => LabelOp::LessThan(raw.parse().map_err(|_| syntax())?),
            };
            return Ok(LabelRequirement { key, op });
        }
    }
    Ok(LabelRequirement { key: checked_key(part, part)?, op: LabelOp::Exists })
}

fn checked_key(key: &str, part: &str) -> Result<String, SelectorError> {
    if super::validation::label_key_errors(key).is_empty() {
        Ok(key.to_string())
    } else {
        Err(SelectorError::Syntax(format!("invalid label key {key:?} in {part:?}")))
    }
}

fn checked_value(value: &str, part: &str) -> Result<String, SelectorError> {
    if super::validation::label_value_errors(value).is_empty() {
        Ok(value.to_string())
    } else {
        Err(SelectorError::Syntax(format!("invalid label value {value:?} in {part:?}")))
    }
}

/// A parsed `fieldSelector`: `field=value`, `field==value` and `field!=value` terms, all of
/// which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses and checks every field against what `resource` can select on.
    pub fn parse(input: &str, resource: &ResourceType) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError::Syntax(format!("invalid selector: {part:?}")));
            };
            let label = field.trim();
            let Some(field) = resource.field_label(label) else {
                return Err(SelectorError::UnsupportedField(label.to_string()));
            };
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value an `=` term requires for `field`, if any (lets lists narrow by name).
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|(f, eq, _)| *eq && f == field).map(|(_, _, v)| v.as_str())
    }

    pub fn matches(&self, fields: &FieldValues) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let actual = fields.get(field).unwrap_or("");
            (actual == value) == *equal
        })
    }
}

/// An object's labels, read once when it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(
    /// Keys and values in turn, in the object's order.
    PackedStrings,
);

impl Labels {
    /// The string-valued entries of `metadata.labels`.
    pub fn of(object: &serde_json::Value) -> Self {
        let Some(map) = json::at(object, "/metadata/labels").and_then(|l| l.as_object()) else {
            return Labels::default();
        };
        let pairs = map.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)));
        Labels(PackedStrings::new(pairs.flat_map(|(k, v)| [k, v])))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        (0..self.0.len() / 2).filter_map(|i| Some((self.0.get(2 * i)?, self.0.get(2 * i + 1)?)))
    }
}

/// The selectable field values of one object, extracted once when it is written:
/// `metadata.name`, `metadata.namespace` for namespaced types, then the type's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldValues {
    resource: &'static ResourceType,
    values: PackedStrings,
}

/// Selectable fields that are bools in Kubernetes' types (absent reads `false`).
const BOOL_FIELDS: &[&str] = &["spec.unschedulable", "spec.hostNetwork"];

impl FieldValues {
    pub fn extract(resource: &'static ResourceType, object: &serde_json::Value) -> Self {
        let metadata = object.get("metadata");
        let text = |name: &str| metadata.and_then(|m| m.get(name)).and_then(|v| v.as_str());
        let mut values: Vec<Cow<'_, str>> =
            Vec::with_capacity(2 + resource.selectable_fields.len());
        values.push(text("name").unwrap_or("").into());
        if resource.namespaced {
            values.push(text("namespace").unwrap_or("").into());
        }
        // Fields in a row often share their parent (`spec.*`, then `status.*`): it is looked
        // up once for them.
        let mut parent: (&str, Option<&serde_json::Value>) = ("", Some(object));
        for field in resource.selectable_fields {
            let (parent_path, name) = field.rsplit_once('.').unwrap_or(("", field));
            if parent_path != parent.0 {
                let found = match parent_path {
                    "" => Some(object),
                    path => json::at_field(object, path),
                };
                parent = (parent_path, found);
            }
            values.push(match parent.1.and_then(|p| json::at_field(p, name)) {
                Some(serde_json::Value::String(s)) => s.as_str().into(),
                Some(serde_json::Value::Bool(b)) => b.to_string().into(),
                Some(serde_json::Value::Number(n)) => n.to_string().into(),
                // `source` on events is an object: select on its component, as Kubernetes does.
                Some(serde_json::Value::Object(o)) => {
                    o.get("component").and_then(|c| c.as_str()).unwrap_or("").into()
                }
                // Go bools: absent is `false`.
                _ if BOOL_FIELDS.contains(field) => "false".into(),
                _ => "".into(),
            });
        }
        FieldValues { resource, values: PackedStrings::new(values.iter().map(|v| v.as_ref())) }
    }

    pub fn get(&self, field: &str) -> Option<&str> {
        let namespaced = self.resource.namespaced;
        let index = match field {
            "metadata.name" => 0,
            "metadata.namespace" if namespaced => 1,
            _ => {
                let own = 1 + usize::from(namespaced);
                own + self.resource.selectable_fields.iter().position(|f| *f == field)?
            }
        };
        self.values.get(index)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_selector_objects() {
        let labels =
            Labels::of(&serde_json::json!({"metadata": {"labels": {"app": "web", "tier": "a"}}}));
        let of = |v: serde_json::Value| LabelSelector::from_object(&v);
        assert!(of(serde_json::json!({})).unwrap().matches(&labels));
        assert!(of(serde_json::json!({"matchLabels": {"app": "web"}})).unwrap().matches(&labels));
        assert!(!of(serde_json::json!({"matchLabels": {"app": "db"}})).unwrap().matches(&labels));
        let expressions = serde_json::json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "gone", "operator": "DoesNotExist"}]});
        assert!(of(expressions).unwrap().matches(&labels));
        let not_in = serde_json::json!({"matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["a"]}]});
        assert!(!of(not_in).unwrap().matches(&labels));
        for bad in [
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            serde_json::json!({"matchLabels": {"a b": "x"}}),
        ] {
            assert!(of(bad.clone()).is_err(), "{bad}");
        }
    }

    use super::*;
    use crate::model::resources;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        let map: serde_json::Map<String, serde_json::Value> =
            pairs.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
        Labels::of(&serde_json::json!({"metadata": {"labels": map}}))
    }

    #[test]
    fn label_operators() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "app in (web,db)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier=front",
            "n>3",
            "n<9",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        let no =
            ["app=db", "app!=web", "app in (db)", "tier notin (front)", "missing", "!app", "n>7"];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        assert!(LabelSelector::parse("missing notin (x)").unwrap().matches(&l));
    }

    #[test]
    fn label_syntax_errors() {
        for s in ["app in (web", "a b=c", "=x", "app in web", "x=a b", "a)"] {
            assert!(LabelSelector::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn field_selectors() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = serde_json::json!({"metadata":{"name":"p","namespace":"ns"},
            "spec":{"nodeName":"n1"},"status":{"phase":"Running"}});
        let fields = FieldValues::extract(pods, &pod);
        for s in ["metadata.name=p", "spec.nodeName=n1,status.phase!=Pending", "spec.nodeName==n1"]
        {
            assert!(FieldSelector::parse(s, pods).unwrap().matches(&fields), "{s}");
        }
        assert!(!FieldSelector::parse("spec.nodeName=", pods).unwrap().matches(&fields));
        assert_eq!(
            FieldSelector::parse("spec.foo=x", pods),
            Err(SelectorError::UnsupportedField("spec.foo".into()))
        );
        assert!(FieldSelector::parse("novalue", pods).is_err());
        // Kubernetes' conversions of pod field labels: `spec.host` is `spec.nodeName`;
        // `status.podIPs` is accepted and always empty.
        for (s, matches) in [
            ("spec.host=n1", true),
            ("spec.host=n2", false),
            ("status.podIPs=", true),
            ("status.podIPs=10.0.0.1", false),
        ] {
            assert_eq!(FieldSelector::parse(s, pods).unwrap().matches(&fields), matches, "{s}");
        }
        let services = resources::find("", "v1", "services").unwrap();
        assert_eq!(
            FieldSelector::parse("spec.host=n1", services),
            Err(SelectorError::UnsupportedField("spec.host".into()))
        );
    }

    #[test]
    fn labels_keep_string_entries() {
        let object =
            serde_json::json!({"metadata": {"labels": {"app": "web", "n": 5, "tier": ""}}});
        let labels = Labels::of(&object);
        assert_eq!(labels.iter().collect::<Vec<_>>(), [("app", "web"), ("tier", "")]);
        assert_eq!(labels.get("tier"), Some(""));
        assert_eq!(labels.get("n"), None);
        assert_eq!(Labels::of(&serde_json::json!({"metadata": {}})), Labels::default());
    }

    #[test]
    fn field_values_by_name() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = serde_json::json!({"metadata":{"name":"p","namespace":"ns"},
            "status":{"phase":"Running"}});
        let fields = FieldValues::extract(pods, &pod);
        assert_eq!(fields.get("metadata.name"), Some("p"));
        assert_eq!(fields.get("metadata.namespace"), Some("ns"));
        assert_eq!(fields.get("status.phase"), Some("Running"));
        assert_eq!(fields.get("spec.nodeName"), Some(""));
        assert_eq!(fields.get("spec.foo"), None);
        let nodes = resources::find("", "v1", "nodes").unwrap();
        let node = serde_json::json!({"metadata":{"name":"n"},"spec":{"unschedulable":true}});
        let fields = FieldValues::extract(nodes, &node);
        assert_eq!(fields.get("metadata.name"), Some("n"));
        assert_eq!(fields.get("metadata.namespace"), None);
        assert_eq!(fields.get("spec.unschedulable"), Some("true"));
        let pods_on_host = FieldValues::extract(pods, &pod);
        assert_eq!(pods_on_host.get("spec.hostNetwork"), Some("false"));
        let services = resources::find("", "v1", "services").unwrap();
        let svc = serde_json::json!({"metadata":{"name":"s","namespace":"d"},
            "spec":{"type":"NodePort","clusterIP":"127.192.0.1"}});
        let fields = FieldValues::extract(services, &svc);
        assert_eq!(
            (fields.get("spec.type"), fields.get("spec.clusterIP")),
            (Some("NodePort"), Some("127.192.0.1"))
        );
        let schedulable = serde_json::json!({"metadata":{"name":"n"},"spec":{}});
        let fields = FieldValues::extract(nodes, &schedulable);
        assert_eq!(fields.get("spec.unschedulable"), Some("false"));
    }

    /// Each field is read from its own parent, whether or not the field before shared it.
    #[test]
    fn field_values_of_every_parent() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = serde_json::json!({"metadata":{"name":"p","namespace":"ns"},
            "spec":{"nodeName":"n1","schedulerName":"s","serviceAccountName":"sa"},
            "status":{"phase":"Running","podIP":"10.0.0.1","nominatedNodeName":"n2"}});
        assert_field_values(
            &FieldValues::extract(pods, &pod),
            &[
                ("spec.nodeName", "n1"),
                ("spec.restartPolicy", ""),
                ("spec.schedulerName", "s"),
                ("spec.serviceAccountName", "sa"),
                ("status.phase", "Running"),
                ("status.podIP", "10.0.0.1"),
                ("status.nominatedNodeName", "n2"),
            ],
        );
        let events = resources::find("", "v1", "events").unwrap();
        let event = serde_json::json!({"metadata":{"name":"e","namespace":"ns"},
            "involvedObject":{"kind":"Pod","name":"p"},"reason":"Started",
            "source":{"component":"kubelet"},"type":"Normal"});
        assert_field_values(
            &FieldValues::extract(events, &event),
            &[
                ("involvedObject.kind", "Pod"),
                ("involvedObject.namespace", ""),
                ("involvedObject.name", "p"),
                ("reason", "Started"),
                ("reportingComponent", ""),
                ("source", "kubelet"),
                ("type", "Normal"),
            ],
        );
    }

    fn assert_field_values(fields: &FieldValues, wanted: &[(&str, &str)]) {
        for &(field, value) in wanted {
            assert_eq!(fields.get(field), Some(value), "{field}");
        }
    }
}

//! Label and field selectors: parsing the query-string syntax and matching objects.

use std::collections::BTreeMap;

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

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels.get(&r.key);
            match &r.op {
                LabelOp::Equals(v) => value == Some(v),
                LabelOp::NotEquals(v) => value != Some(v),
                LabelOp::In(vs) => value.is_some_and(|x| vs.contains(x)),
                LabelOp::NotIn(vs) => !value.is_some_and(|x| vs.contains(x)),
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
            let field = field.trim();
            if !resource.selects_field(field) {
                return Err(SelectorError::UnsupportedField(field.to_string()));
            }
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

/// The selectable field values of one object, extracted once when it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldValues(Vec<(&'static str, String)>);

impl FieldValues {
    /// Extracts `metadata.name`, `metadata.namespace` and the resource's selectable fields.
    pub fn extract(resource: &ResourceType, object: &serde_json::Value) -> Self {
        let mut values = Vec::with_capacity(2 + resource.selectable_fields.len());
        let name = json::at(object, "/metadata/name").and_then(|v| v.as_str()).unwrap_or("");
        values.push(("metadata.name", name.to_string()));
        if resource.namespaced {
            let ns = json::at(object, "/metadata/namespace").and_then(|v| v.as_str());
            values.push(("metadata.namespace", ns.unwrap_or("").to_string()));
        }
        for field in resource.selectable_fields {
            let value = match json::at_field(object, field) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Bool(b)) => b.to_string(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                // `source` on events is an object: select on its component, as Kubernetes does.
                Some(serde_json::Value::Object(o)) => {
                    o.get("component").and_then(|c| c.as_str()).unwrap_or("").to_string()
                }
                _ => String::new(),
            };
            values.push((field, value));
        }
        Self(values)
    }

    pub fn get(&self, field: &str) -> Option<&str> {
        self.0.iter().find(|(f, _)| *f == field).map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resources;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
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
    }
}

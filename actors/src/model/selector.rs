//! Label and field selectors: parsing the query-string syntax and matching objects.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use super::packed::PackedStrings;
use super::text::go_quote;
use super::{json, ResourceType};

/// Why a selector string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("{0}")]
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
    /// Parses the string form, as Kubernetes' grammar reads it: `a=b,c!=d,e in (f,g),
    /// h notin(i),j,!k,n>3`.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser { tokens: tokens(input), at: 0 };
        let requirements = parser.selector().map_err(SelectorError::Syntax)?;
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
        let bad =
            |what: String| SelectorError::Syntax(format!("unable to parse requirement: {what}"));
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(|m| m.as_object()) {
            for (key, value) in labels {
                let value = value.as_str().ok_or_else(|| bad(format!("{key}: {value}")))?;
                let op = LabelOp::Equals(checked_value(value, key, 0)?);
                requirements.push(LabelRequirement { key: checked_key(key, "key")?, op });
            }
        }
        let expressions = selector.get("matchExpressions").and_then(|e| e.as_array());
        for expression in expressions.into_iter().flatten() {
            let key = expression.get("key").and_then(|k| k.as_str()).unwrap_or("");
            let key = checked_key(key, "key")?;
            let values: Vec<String> = expression
                .get("values")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, v)| checked_value(v.as_str().unwrap_or(""), &key, i))
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

/// A token of Kubernetes' label selector grammar (`k8s.io/apimachinery/pkg/labels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Identifier(&'a str),
    In,
    NotIn,
    /// `!`: the key that follows must not exist.
    Bang,
    NotEquals,
    Open,
    Close,
    Comma,
    Equals,
    DoubleEquals,
    Greater,
    Less,
    End,
}

impl<'a> Token<'a> {
    /// The text the token was read from, as Kubernetes' messages quote it.
    fn literal(self) -> &'a str {
        match self {
            Token::Identifier(text) => text,
            Token::In => "in",
            Token::NotIn => "notin",
            Token::Bang => "!",
            Token::NotEquals => "!=",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::Greater => ">",
            Token::Less => "<",
            Token::End => "",
        }
    }
}

/// What separates tokens without being one, as Kubernetes' lexer skips it.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// Characters that end an identifier and start an operator.
fn is_symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits a selector into tokens as Kubernetes' lexer does: spaces, tabs and line ends
/// separate; symbols (`=`, `==`, `!=`, `!`, `(`, `)`, `,`, `>`, `<`) separate and are tokens,
/// the longest first; what lies between is an identifier, or the keyword `in` or `notin`.
fn tokens(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    loop {
        while at < bytes.len() && is_space(bytes[at]) {
            at += 1;
        }
        // A NUL ends the input, as it ends Go's lexer.
        if at == bytes.len() || bytes[at] == 0 {
            tokens.push(Token::End);
            return tokens;
        }
        if is_symbol(bytes[at]) {
            let (token, length) = match (bytes[at], bytes.get(at + 1)) {
                (b'!', Some(b'=')) => (Token::NotEquals, 2),
                (b'=', Some(b'=')) => (Token::DoubleEquals, 2),
                (b'!', _) => (Token::Bang, 1),
                (b'=', _) => (Token::Equals, 1),
                (b'(', _) => (Token::Open, 1),
                (b')', _) => (Token::Close, 1),
                (b',', _) => (Token::Comma, 1),
                (b'>', _) => (Token::Greater, 1),
                _ => (Token::Less, 1),
            };
            tokens.push(token);
            at += length;
            continue;
        }
        let start = at;
        while at < bytes.len() && !is_symbol(bytes[at]) && !is_space(bytes[at]) && bytes[at] != 0 {
            at += 1;
        }
        tokens.push(match &input[start..at] {
            "in" => Token::In,
            "notin" => Token::NotIn,
            text => Token::Identifier(text),
        });
    }
}

/// Kubernetes' recursive-descent parser of label selectors, over [`tokens`]. Where values are
/// expected, `in` and `notin` are identifiers (a label may be called `in`).
struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    at: usize,
}

/// A selector that does not parse, in Kubernetes' words.
type Parsed<T> = Result<T, String>;

impl<'a> Parser<'a> {
    fn peek(&self, values: bool) -> Token<'a> {
        let token = self.tokens[self.at];
        match (values, token) {
            (true, Token::In | Token::NotIn) => Token::Identifier(token.literal()),
            _ => token,
        }
    }

    fn next(&mut self, values: bool) -> Token<'a> {
        let token = self.peek(values);
        self.at = (self.at + 1).min(self.tokens.len() - 1);
        token
    }

    /// Requirements separated by commas, up to the end.
    fn selector(&mut self) -> Parsed<Vec<LabelRequirement>> {
        let mut requirements = Vec::new();
        loop {
            match self.peek(true) {
                Token::Identifier(_) | Token::Bang => {
                    let requirement = self
                        .requirement()
                        .map_err(|why| format!("unable to parse requirement: {why}"))?;
                    requirements.push(requirement);
                    match self.next(true) {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let after = self.peek(true);
                            if !matches!(after, Token::Identifier(_) | Token::Bang) {
                                let found = after.literal();
                                return Err(format!(
                                    "found '{found}', expected: identifier after ','"
                                ));
                            }
                        }
                        other => {
                            let found = other.literal();
                            return Err(format!(
                                "found '{found}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                other => {
                    let found = other.literal();
                    return Err(format!(
                        "found '{found}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Parsed<LabelRequirement> {
        let mut token = self.next(true);
        let absent = token == Token::Bang;
        if absent {
            token = self.next(true);
        }
        let Token::Identifier(key) = token else {
            return Err(format!("found '{}', expected: identifier", token.literal()));
        };
        // Checked at no path, as Kubernetes' parser checks it (printed `<nil>`).
        let key = checked_key(key, "<nil>").map_err(|e| e.to_string())?;
        if absent {
            return Ok(LabelRequirement { key, op: LabelOp::DoesNotExist });
        }
        if matches!(self.peek(true), Token::End | Token::Comma) {
            return Ok(LabelRequirement { key, op: LabelOp::Exists });
        }
        let operator = self.next(false);
        let op = match operator {
            Token::In => LabelOp::In(self.set(&key)?),
            Token::NotIn => LabelOp::NotIn(self.set(&key)?),
            Token::Equals | Token::DoubleEquals => LabelOp::Equals(self.exact_value(&key)?),
            Token::NotEquals => LabelOp::NotEquals(self.exact_value(&key)?),
            Token::Greater | Token::Less => {
                let value = self.exact_value_unchecked()?;
                let mut problems = Vec::new();
                let number = value.parse::<i64>().map_err(|_| {
                    problems.push(format!(
                        "values[0]: Invalid value: {}: for 'Gt', 'Lt' operators, the value \
                         must be an integer",
                        go_quote(value)
                    ))
                });
                if let Err(problem) = checked_value(value, &key, 0) {
                    problems.push(problem.to_string());
                }
                let number = match number {
                    Ok(number) if problems.is_empty() => number,
                    _ => return Err(one_or_all(problems)),
                };
                if operator == Token::Greater {
                    LabelOp::GreaterThan(number)
                } else {
                    LabelOp::LessThan(number)
                }
            }
            other => {
                let found = other.literal();
                return Err(format!("found '{found}', expected: in, notin, =, ==, !=, gt, lt"));
            }
        };
        Ok(LabelRequirement { key, op })
    }

    /// `(a,b,...)`: the values of `in` and `notin`, sorted and without repeats; an empty
    /// place (`()`, `(a,)`) is the empty value.
    fn set(&mut self, key: &str) -> Parsed<Vec<String>> {
        let open = self.next(true);
        if open != Token::Open {
            return Err(format!("found '{}' expected: '('", open.literal()));
        }
        let mut values = std::collections::BTreeSet::new();
        match self.peek(true) {
            Token::Close => {
                self.next(true);
                values.insert("");
            }
            Token::Identifier(_) | Token::Comma => {
                self.identifiers(&mut values)?;
                let close = self.next(true);
                if close != Token::Close {
                    return Err(format!("found '{}', expected: ')'", close.literal()));
                }
            }
            other => {
                let found = other.literal();
                return Err(format!("found '{found}', expected: ',', ')' or identifier"));
            }
        }
        // Each value checked at its place in the sorted set, every problem told.
        let problems: Vec<String> = (values.iter().enumerate())
            .filter_map(|(i, v)| checked_value(v, key, i).err().map(|e| e.to_string()))
            .collect();
        if !problems.is_empty() {
            return Err(one_or_all(problems));
        }
        Ok(values.into_iter().map(str::to_string).collect())
    }

    /// The values of a set up to (not including) its `)`.
    fn identifiers(&mut self, values: &mut std::collections::BTreeSet<&'a str>) -> Parsed<()> {
        loop {
            match self.next(true) {
                Token::Identifier(value) => {
                    values.insert(value);
                    match self.peek(true) {
                        Token::Comma => continue,
                        Token::Close => return Ok(()),
                        other => {
                            return Err(format!(
                                "found '{}', expected: ',' or ')'",
                                other.literal()
                            ))
                        }
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert("");
                    }
                    match self.peek(true) {
                        Token::Close => {
                            values.insert("");
                            return Ok(());
                        }
                        Token::Comma => {
                            self.next(true);
                            values.insert("");
                        }
                        _ => {}
                    }
                }
                other => {
                    return Err(format!(
                        "found '{}', expected: ',', or identifier",
                        other.literal()
                    ))
                }
            }
        }
    }

    /// The one value after `=`, `==`, `!=`, `>` or `<` (none: the empty value).
    fn exact_value(&mut self, key: &str) -> Parsed<String> {
        let value = self.exact_value_unchecked()?;
        checked_value(value, key, 0).map_err(|e| e.to_string())
    }

    /// As [`Self::exact_value`], not yet checked as a label value.
    fn exact_value_unchecked(&mut self) -> Parsed<&'a str> {
        if matches!(self.peek(true), Token::End | Token::Comma) {
            return Ok("");
        }
        match self.next(true) {
            Token::Identifier(value) => Ok(value),
            other => Err(format!("found '{}', expected: identifier", other.literal())),
        }
    }
}

/// One problem as it is, several as Kubernetes aggregates them (`[a, b]`).
fn one_or_all(mut problems: Vec<String>) -> String {
    match problems.len() {
        1 => problems.remove(0),
        _ => format!("[{}]", problems.join(", ")),
    }
}

/// A selector's key, checked as a label key (`<path>: Invalid value: ...` with why).
fn checked_key(key: &str, path: &str) -> Result<String, SelectorError> {
    let problems = super::validation::label_key_errors(key);
    if problems.is_empty() {
        return Ok(key.to_string());
    }
    let why = problems.join("; ");
    Err(SelectorError::Syntax(format!("{path}: Invalid value: {}: {why}", go_quote(key))))
}

/// The `index`th value of the selector's requirement on `key`, checked as a label value.
fn checked_value(value: &str, key: &str, index: usize) -> Result<String, SelectorError> {
    let problems = super::validation::label_value_errors(value);
    if problems.is_empty() {
        return Ok(value.to_string());
    }
    let why = problems.join("; ");
    Err(SelectorError::Syntax(format!(
        "values[{index}][{key}]: Invalid value: {}: {why}",
        go_quote(value)
    )))
}

/// A parsed `fieldSelector`: `field=value`, `field==value` and `field!=value` terms, all of
/// which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses and checks every field against what `resource` can select on. Terms are split
    /// at commas, taken as written (spaces are part of them) in sorted order, and values read
    /// as Kubernetes reads them: `\,`, `\=` and `\\` stand for the character; any other
    /// escape, or a bare `,` or `=` in a value, is refused. As in Kubernetes, every term is
    /// read before any field is checked.
    pub fn parse(input: &str, resource: &ResourceType) -> Result<Self, SelectorError> {
        let mut parts: Vec<&str> = unescaped_commas(input).filter(|p| !p.is_empty()).collect();
        parts.sort_unstable();
        let mut read = Vec::with_capacity(parts.len());
        for part in parts {
            let Some((label, equal, value)) = field_term(part) else {
                let why = format!("invalid selector: '{input}'; can't understand '{part}'");
                return Err(SelectorError::Syntax(why));
            };
            let value = unescape_field_value(value).map_err(SelectorError::Syntax)?;
            read.push((label, equal, value));
        }
        let mut terms = Vec::with_capacity(read.len());
        for (label, equal, value) in read {
            let Some(field) = resource.field_label(label) else {
                return Err(SelectorError::UnsupportedField(label.to_string()));
            };
            terms.push((field.to_string(), equal, value));
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

/// The selector as a `fieldSelector` parameter, in the fields it was read into (values
/// escaped as `parse` reads them).
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (field, equal, value)) in self.terms.iter().enumerate() {
            let (separator, operator) =
                (if i == 0 { "" } else { "," }, if *equal { "=" } else { "!=" });
            write!(f, "{separator}{field}{operator}")?;
            for c in value.chars() {
                if matches!(c, '\\' | ',' | '=') {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// A field selector's terms: split at the commas no backslash escapes.
fn unescaped_commas(input: &str) -> impl Iterator<Item = &str> {
    let mut escaped = false;
    input.split(move |c: char| {
        let split = c == ',' && !escaped;
        escaped = !escaped && c == '\\';
        split
    })
}

/// A field selector term's field, whether it asks for equality (`=`, `==`) or not (`!=`),
/// and its value: split at the first operator from the left, as Kubernetes splits it.
fn field_term(term: &str) -> Option<(&str, bool, &str)> {
    (0..term.len()).filter(|at| term.is_char_boundary(*at)).find_map(|at| {
        let rest = &term[at..];
        let (equal, length) = if rest.starts_with("!=") {
            (false, 2)
        } else if rest.starts_with("==") {
            (true, 2)
        } else if rest.starts_with('=') {
            (true, 1)
        } else {
            return None;
        };
        Some((&term[..at], equal, &rest[length..]))
    })
}

/// A field selector value with its escapes resolved (Kubernetes' `UnescapeValue`).
fn unescape_field_value(value: &str) -> Result<String, String> {
    let mut unescaped = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => unescaped.push(escaped),
                other => {
                    let sequence: String = std::iter::once('\\').chain(other).collect();
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: {sequence}"
                    ));
                }
            },
            ',' | '=' => {
                // Go prints the rune as its number.
                let rune = c as u32;
                return Err(format!(
                    "invalid field selector: unescaped character in value: {rune}"
                ));
            }
            other => unescaped.push(other),
        }
    }
    Ok(unescaped)
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
                // `source` on events is an object: select on its component, as Kubernetes does
                // (or, without one, on the reporting controller, as newer recorders say it).
                Some(serde_json::Value::Object(o)) => {
                    match o.get("component").and_then(|c| c.as_str()).filter(|c| !c.is_empty()) {
                        Some(component) => component.into(),
                        None => reporting_controller(object).into(),
                    }
                }
                _ if *field == "source" => reporting_controller(object).into(),
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
            // A cluster-scoped object's namespace is empty (where the kind selects on it).
            "metadata.namespace" if self.resource.selects_field(field) => return Some(""),
            _ => {
                let own = 1 + usize::from(namespaced);
                own + self.resource.selectable_fields.iter().position(|f| *f == field)?
            }
        };
        self.values.get(index)
    }
}

/// An event's reporting controller (`reportingComponent`), what `source` selects on when the
/// event names no source component.
fn reporting_controller(event: &serde_json::Value) -> &str {
    event.get("reportingComponent").and_then(|c| c.as_str()).unwrap_or("")
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

    #[test]
    fn a_field_selector_is_written_back_as_it_reads() {
        let pods = resources::core("pods");
        let input = r"spec.host=n\,1,status.phase!=a\=b\\c,metadata.name==p";
        let parsed = FieldSelector::parse(input, pods).unwrap();
        let written = parsed.to_string();
        // In sorted order, as Kubernetes reads the terms.
        assert_eq!(written, r"metadata.name=p,spec.nodeName=n\,1,status.phase!=a\=b\\c");
        assert_eq!(FieldSelector::parse(&written, pods).unwrap(), parsed);
        assert_eq!(FieldSelector::default().to_string(), "");
    }

    #[test]
    fn field_selector_terms_are_taken_as_written() {
        let pods = resources::core("pods");
        let refused = |input: &str| FieldSelector::parse(input, pods).unwrap_err().to_string();
        assert_eq!(refused("status.phase = Running"), "field label not supported: status.phase ");
        assert_eq!(
            refused("metadata.name=p, "),
            "invalid selector: 'metadata.name=p, '; can't understand ' '"
        );
        // A trailing space is part of the value.
        let spaced = FieldSelector::parse("metadata.name=p ", pods).unwrap();
        assert_eq!(spaced.required_value("metadata.name"), Some("p "));
        // Every term is read before a field is checked; the first in sorted order fails.
        assert_eq!(refused("foo,bar"), "invalid selector: 'foo,bar'; can't understand 'bar'");
        assert!(refused(r"spec.foo=x,metadata.name=a\b").contains("escape"));
    }

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
    fn labels_parse_as_kubernetes_grammar_reads_them() {
        let l = labels(&[("app", "web"), ("in", "x"), ("e", "")]);
        // Parentheses and symbols separate, as spaces, tabs and line ends do.
        for s in [
            "app in(web)",
            "app\tin\t(web)",
            "app notin(db)",
            "app in (db,web,)",
            "in=x",
            "app=web , in in (x)",
            "e in ()",
            "e=",
            "e==",
            "app!=",
            "!missing",
        ] {
            assert!(LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        let refused = [
            (",a=b", "found ',', expected: !, identifier, or 'end of string'"),
            ("a in (b),", "found '', expected: identifier after ','"),
            ("a=b,,c=d", "found ',', expected: identifier after ','"),
            ("a=b)", "found ')', expected: ',' or 'end of string'"),
            ("a in b", "unable to parse requirement: found 'b' expected: '('"),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            (
                "a>x",
                "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' \
              operators, the value must be an integer",
            ),
        ];
        for (s, message) in refused {
            assert_eq!(LabelSelector::parse(s), Err(SelectorError::Syntax(message.into())), "{s}");
        }
        let Err(SelectorError::Syntax(bad_key)) = LabelSelector::parse("a_-=b") else { panic!() };
        assert!(bad_key.starts_with("unable to parse requirement: <nil>: Invalid value: \"a_-\""));
        // Every value's problem, at its place in the sorted set.
        let Err(SelectorError::Syntax(values)) = LabelSelector::parse("x in (b_,a,c_)") else {
            panic!()
        };
        assert!(
            values.starts_with("unable to parse requirement: [values[1][x]: Invalid value: \"b_\""),
            "{values}"
        );
        assert!(values.contains(", values[2][x]: Invalid value: \"c_\""), "{values}");
        let Err(SelectorError::Syntax(both)) = LabelSelector::parse("a>x_") else { panic!() };
        assert!(
            both.starts_with(
                "unable to parse requirement: [values[0]: Invalid value: \"x_\": for 'Gt'"
            ),
            "{both}"
        );
    }

    #[test]
    fn field_values_are_unescaped_as_kubernetes_reads_them() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = serde_json::json!({"metadata": {"name": "p,1=x\\"}});
        let fields = FieldValues::extract(pods, &pod);
        let escaped = "metadata.name=p\\,1\\=x\\\\";
        assert!(FieldSelector::parse(escaped, pods).unwrap().matches(&fields), "{escaped}");
        let refused = [
            ("metadata.name=a\\b", "invalid field selector: invalid escape sequence: \\b"),
            ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
            ("novalue", "invalid selector: 'novalue'; can't understand 'novalue'"),
        ];
        for (s, message) in refused {
            let parsed = FieldSelector::parse(s, pods);
            assert_eq!(parsed, Err(SelectorError::Syntax(message.into())), "{s}");
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
        // Without a source component, `source` is the reporting controller.
        let reported = serde_json::json!({"metadata":{"name":"e","namespace":"ns"},
            "reportingComponent":"example.com/ctrl"});
        assert_eq!(FieldValues::extract(events, &reported).get("source"), Some("example.com/ctrl"));
        // A cluster-scoped kind without fields of its own selects on an empty namespace.
        let volumes = resources::find("", "v1", "persistentvolumes").unwrap();
        assert!(volumes.selects_field("metadata.namespace"));
        let volume = serde_json::json!({"metadata":{"name":"pv"}});
        assert_eq!(FieldValues::extract(volumes, &volume).get("metadata.namespace"), Some(""));
        assert!(!resources::find("", "v1", "nodes").unwrap().selects_field("metadata.namespace"));
    }

    fn assert_field_values(fields: &FieldValues, wanted: &[(&str, &str)]) {
        for &(field, value) in wanted {
            assert_eq!(fields.get(field), Some(value), "{field}");
        }
    }
}

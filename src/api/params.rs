//! Query parameters of resource requests, parsed once and checked.

use std::collections::HashMap;

use actix_web::http::Method;
use actix_web::HttpRequest;
use kplane_actors::core::{
    ApiError, DeleteOptions, ListOptions, ObjectView, WatchOptions, WriteOptions,
};
use kplane_actors::model::FieldError;
use serde_json::Value;

use super::body::FieldValidation;
use crate::error::HttpError;

/// The query string as a map (a repeated key: its first value), and every `dryRun` given
/// (a list in Kubernetes' options, each value checked).
pub struct Query(HashMap<String, String>, Vec<String>);

impl Query {
    pub fn parse(req: &HttpRequest) -> Result<Self, HttpError> {
        Self::of(req.query_string())
    }

    /// The query string `query` (without its `?`).
    pub fn of(query: &str) -> Result<Self, HttpError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|e| HttpError::BadRequest(format!("malformed query string: {e}")))?;
        // A key given twice means its first value, as Kubernetes' query decoding reads it.
        let mut params = HashMap::with_capacity(pairs.len());
        let mut dry_runs = Vec::new();
        for (key, value) in pairs {
            if key == "dryRun" {
                dry_runs.push(value.clone());
            }
            params.entry(key).or_insert(value);
        }
        Ok(Self(params, dry_runs))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A boolean parameter as Kubernetes reads one: absent, `0` or `false` (any case) is
    /// false, any other value (an empty one too: `?watch`) true.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    /// The integer `key` names, refused (400) in the words of Go's `strconv.ParseInt`, which
    /// Kubernetes' query decoding answers with.
    pub fn number(&self, key: &str) -> Result<Option<i64>, HttpError> {
        self.get(key)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<i64>().map_err(|e| {
                    let why = match e.kind() {
                        std::num::IntErrorKind::PosOverflow
                        | std::num::IntErrorKind::NegOverflow => "value out of range",
                        _ => "invalid syntax",
                    };
                    let quoted = kplane_actors::model::text::go_quote(v);
                    HttpError::BadRequest(format!("strconv.ParseInt: parsing {quoted}: {why}"))
                })
            })
            .transpose()
    }

    /// Whether `dryRun=All` was asked; another value is refused with 422 on `options` (the
    /// options kind of the request, `CreateOptions`, `DeleteOptions`, ...).
    pub fn dry_run(&self, options: &'static str) -> Result<bool, HttpError> {
        let given: Vec<&str> =
            self.1.iter().map(String::as_str).filter(|v| !v.is_empty()).collect();
        if given.iter().any(|v| *v != "All") {
            return Err(invalid_options(options, vec![dry_run_not_supported(&given)]));
        }
        Ok(!given.is_empty())
    }

    /// The options of a create, update or patch (their kind from the request's method):
    /// `dryRun`, `force`, and `fieldManager`, which defaults to the User-Agent's product name
    /// (`kubectl`, `OpenAPI-Generator`), as in Kubernetes.
    pub fn write_options(&self, req: &HttpRequest) -> Result<WriteOptions, HttpError> {
        let mut options = self.options_of(options_kind(req))?;
        options.field_manager.get_or_insert_with(|| user_agent_manager(req));
        Ok(options)
    }

    /// The request's `fieldValidation`: a value Kubernetes does not take is 422 on the
    /// request's options kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`), as its
    /// options' validation answers.
    pub fn field_validation(&self, req: &HttpRequest) -> Result<FieldValidation, HttpError> {
        FieldValidation::parse(self.get("fieldValidation")).ok_or_else(|| {
            invalid_options(options_kind(req), vec![self.field_validation_not_supported()])
        })
    }

    fn field_validation_not_supported(&self) -> FieldError {
        let value = self.get("fieldValidation").unwrap_or_default();
        FieldError::not_supported("fieldValidation", value, &["", "Ignore", "Strict", "Warn"])
    }

    /// The options of a server-side apply: as for other writes, but the field manager is only
    /// the one the request names (Kubernetes requires it for apply, with no default).
    pub fn apply_options(&self) -> Result<WriteOptions, HttpError> {
        self.options_of("PatchOptions")
    }

    /// The write options the query names, checked as Kubernetes checks `kind`: `fieldManager`
    /// at most 128 bytes, all printable.
    fn options_of(&self, kind: &'static str) -> Result<WriteOptions, HttpError> {
        let field_manager = self.get("fieldManager").filter(|m| !m.is_empty());
        let mut causes = Vec::new();
        if let Some(manager) = field_manager {
            if manager.len() > 128 {
                causes.push(FieldError::too_long("fieldManager", 128));
            }
            for (at, c) in manager.char_indices().filter(|(_, c)| !is_printable(*c)) {
                let detail = format!("invalid character U+{:04X} (at position {at})", c as u32);
                causes.push(FieldError::invalid("fieldManager", manager, detail));
            }
        }
        let dry_run = self.dry_run(kind);
        if let Err(HttpError::Api(ApiError::Invalid { causes: dry_run, .. })) = &dry_run {
            causes.extend(dry_run.iter().cloned());
        }
        let validation = FieldValidation::parse(self.get("fieldValidation"));
        if validation.is_none() {
            causes.push(self.field_validation_not_supported());
        }
        if !causes.is_empty() {
            return Err(invalid_options(kind, causes));
        }
        let field_manager = field_manager.map(String::from);
        Ok(WriteOptions {
            dry_run: dry_run?,
            field_manager,
            force: self.flag("force"),
            strict_fields: validation == Some(FieldValidation::Strict),
            patch_findings: Vec::new(),
            create_denied: None,
        })
    }

    pub fn list_options(&self) -> Result<ListOptions, HttpError> {
        // A limit of zero or below asks for no paging, as in Kubernetes.
        let limit = self.number("limit")?.filter(|n| *n > 0).map(|n| n as usize);
        // Decoded for a list too (and so refused when not a number), though only a watch ends.
        self.number("timeoutSeconds")?;
        Ok(ListOptions {
            label_selector: self.get("labelSelector").map(String::from),
            field_selector: self.get("fieldSelector").map(String::from),
            limit,
            continue_token: self.get("continue").filter(|c| !c.is_empty()).map(String::from),
            resource_version: self
                .get("resourceVersion")
                .filter(|v| !v.is_empty())
                .map(String::from),
            resource_version_match: self
                .get("resourceVersionMatch")
                .filter(|v| !v.is_empty())
                .map(String::from),
            view: ObjectView::Whole,
        })
    }

    pub fn watch_options(&self) -> Result<WatchOptions, HttpError> {
        // Decoded for a watch too (and so refused when not a number), as Kubernetes decodes
        // a watch's options as a list's.
        self.number("limit")?;
        let resource_version = self.get("resourceVersion").map(String::from);
        // Kubernetes 1.32's defaults (its WatchList feature, on): a watch from no revision or
        // from "0" that names neither is a watch list, sending the current state first, and
        // with bookmarks a bookmark marking that state's end.
        let send_initial_events = match self.get("sendInitialEvents") {
            Some(_) => Some(self.flag("sendInitialEvents")),
            None if self.get("resourceVersionMatch").is_none_or(str::is_empty)
                && matches!(resource_version.as_deref(), None | Some("" | "0")) =>
            {
                Some(true)
            }
            None => None,
        };
        Ok(WatchOptions {
            label_selector: self.get("labelSelector").map(String::from),
            field_selector: self.get("fieldSelector").map(String::from),
            resource_version,
            allow_bookmarks: self.flag("allowWatchBookmarks"),
            send_initial_events,
            view: ObjectView::Whole,
            timeout: None,
        })
    }

    /// Delete options from the query string, overridden by a `DeleteOptions` body.
    pub fn delete_options(&self, body: Option<&Value>) -> Result<DeleteOptions, HttpError> {
        let mut options = DeleteOptions {
            grace_period_seconds: self.number("gracePeriodSeconds")?,
            propagation_policy: self.get("propagationPolicy").map(String::from),
            dry_run: self.dry_run("DeleteOptions")?,
            orphan_dependents: self.get("orphanDependents").map(|_| self.flag("orphanDependents")),
            ..DeleteOptions::default()
        };
        let mut causes = Vec::new();
        let mut dry_run_refused = None;
        if let Some(body) = body {
            let Some(map) = body.as_object() else {
                return Err(HttpError::BadRequest("DeleteOptions must be a JSON object".into()));
            };
            if let Some(p) = map.get("propagationPolicy").and_then(Value::as_str) {
                options.propagation_policy = Some(p.to_string());
            }
            if let Some(orphan) = map.get("orphanDependents").and_then(Value::as_bool) {
                options.orphan_dependents = Some(orphan);
            }
            if let Some(g) = map.get("gracePeriodSeconds").and_then(Value::as_i64) {
                options.grace_period_seconds = Some(g);
            }
            if let Some(pre) = map.get("preconditions") {
                options.precondition_uid = pre.get("uid").and_then(Value::as_str).map(String::from);
                options.precondition_resource_version =
                    pre.get("resourceVersion").and_then(Value::as_str).map(String::from);
            }
            let values = map.get("dryRun").and_then(Value::as_array).into_iter().flatten();
            let values: Vec<&str> = values.map(|v| v.as_str().unwrap_or_default()).collect();
            if values.iter().any(|v| *v != "All") {
                dry_run_refused = Some(dry_run_not_supported(&values));
            } else if !values.is_empty() {
                options.dry_run = true;
            }
        }
        // The older form of propagationPolicy, which may not be given with it.
        if let Some(orphan) = options.orphan_dependents {
            match &options.propagation_policy {
                None => {
                    let policy = if orphan { "Orphan" } else { "Background" };
                    options.propagation_policy = Some(policy.into());
                }
                Some(policy) => causes.push(FieldError::invalid(
                    "propagationPolicy",
                    policy,
                    "orphanDependents and deletionPropagation cannot be both set",
                )),
            }
        }
        match options.propagation_policy.as_deref() {
            None | Some("Orphan") | Some("Background") | Some("Foreground") => {}
            Some(other) => causes.push(FieldError::not_supported(
                "propagationPolicy",
                other,
                &["Foreground", "Background", "Orphan", "nil"],
            )),
        }
        // In Kubernetes' order: the policy's problems, then the dry run's.
        causes.extend(dry_run_refused);
        if causes.is_empty() {
            Ok(options)
        } else {
            Err(invalid_options("DeleteOptions", causes))
        }
    }
}

/// Go's `unicode.IsPrint`, nearly: not a control or format character, and no space but ' '.
fn is_printable(c: char) -> bool {
    let format = matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}');
    !(c.is_control() || format || (c.is_whitespace() && c != ' '))
}

/// The options kind of a write by its method, as Kubernetes names it in its refusals.
fn options_kind(req: &HttpRequest) -> &'static str {
    match *req.method() {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        _ => "PatchOptions",
    }
}

fn invalid_options(kind: &'static str, causes: Vec<FieldError>) -> HttpError {
    HttpError::Api(ApiError::invalid_options(kind, causes))
}

/// `dryRun` values other than `All`, worded as Kubernetes words it (one error showing the
/// whole list).
fn dry_run_not_supported(values: &[&str]) -> FieldError {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    FieldError {
        reason: "FieldValueNotSupported",
        field: "dryRun".into(),
        message: format!(
            "Unsupported value: []string{{{}}}: supported values: \"All\"",
            quoted.join(", ")
        ),
    }
}

/// The field manager of a request that names none: the User-Agent up to its first `/`.
fn user_agent_manager(req: &HttpRequest) -> String {
    let agent = req
        .headers()
        .get(actix_web::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let product: String = agent.split('/').next().unwrap_or("").chars().take(128).collect();
    if product.trim().is_empty() {
        "unknown".into()
    } else {
        product
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn causes(error: HttpError) -> Vec<String> {
        match error {
            HttpError::Api(ApiError::Invalid { kind, causes, .. }) => {
                causes.iter().map(|c| format!("{kind} {}: {}", c.field, c.message)).collect()
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_repeated_key_means_its_first_value() {
        let query = Query::of("watch=true&watch=false&limit=5&limit=9").unwrap();
        assert!(query.flag("watch"));
        assert_eq!(query.get("limit"), Some("5"));
        // But for `dryRun`, a list in Kubernetes: every value is checked.
        assert!(Query::of("dryRun=All&dryRun=All").unwrap().dry_run("DeleteOptions").unwrap());
        let mixed = Query::of("dryRun=All&dryRun=Bogus").unwrap().dry_run("DeleteOptions");
        let Err(HttpError::Api(ApiError::Invalid { causes, .. })) = mixed else {
            panic!("{mixed:?}")
        };
        assert!(causes[0].message.contains(r#"[]string{"All", "Bogus"}"#), "{causes:?}");
    }

    #[test]
    fn booleans_are_false_only_when_absent_zero_or_false() {
        let query = Query::of("a&b=&c=1&d=True&e=yes&f=0&g=FALSE").unwrap();
        let read: Vec<bool> =
            ["a", "b", "c", "d", "e", "f", "g", "h"].map(|k| query.flag(k)).into();
        assert_eq!(read, [true, true, true, true, true, false, false, false]);
    }

    #[test]
    fn options_kubernetes_refuses_are_invalid_on_their_kind() {
        let query = Query::of("fieldManager=a%C2%A0b&dryRun=Maybe").unwrap();
        assert_eq!(
            causes(query.options_of("UpdateOptions").unwrap_err()),
            [
                "UpdateOptions fieldManager: Invalid value: \"a\\u00a0b\": invalid character U+00A0 (at position 1)",
                "UpdateOptions dryRun: Unsupported value: []string{\"Maybe\"}: supported values: \"All\"",
            ]
        );
        let body = json!({"dryRun": ["All", "Twice"], "propagationPolicy": "Sideways",
            "orphanDependents": true});
        assert_eq!(
            causes(Query::of("").unwrap().delete_options(Some(&body)).unwrap_err()),
            [
                "DeleteOptions propagationPolicy: Invalid value: \"Sideways\": orphanDependents and deletionPropagation cannot be both set",
                "DeleteOptions propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                "DeleteOptions dryRun: Unsupported value: []string{\"All\", \"Twice\"}: supported values: \"All\"",
            ]
        );
        let fine = json!({"dryRun": ["All"], "orphanDependents": true});
        let options = Query::of("").unwrap().delete_options(Some(&fine)).unwrap();
        assert!(options.dry_run);
        assert_eq!(options.propagation_policy.as_deref(), Some("Orphan"));
    }
}

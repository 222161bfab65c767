//! The audit log (`--audit-log-path`): one line of JSON for every request on either port, as
//! kube-apiserver's log backend writes it at level `Metadata`: an `audit.k8s.io/v1` Event with
//! who asked (user, source IP, user agent), what (verb, URI, object reference), when, the
//! answer's code, and the authorization decision. A streamed answer (a watch, logs, exec) is
//! logged when it starts (`ResponseStarted`), every other one when it is complete.

use std::fs::{File, OpenOptions};
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::attributes::Attributes;
use super::{AuthConfigError, UserInfo};

/// The log file, shared by the HTTP workers.
#[derive(Debug)]
pub struct AuditLog {
    file: Mutex<LineWriter<File>>,
}

/// One request's record.
pub struct Record<'a> {
    pub user: &'a UserInfo,
    pub attributes: &'a Attributes,
    pub uri: &'a str,
    pub source_ip: Option<String>,
    pub user_agent: Option<&'a str>,
    pub code: u16,
    pub streamed: bool,
    pub decision: &'static str,
    pub received: &'a str,
}

impl AuditLog {
    /// Opens (appending to) the log at `path`, creating it readable by its owner only.
    pub fn open(path: &Path) -> Result<Self, AuthConfigError> {
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path).map_err(|e| AuthConfigError::file(path, e))?;
        Ok(AuditLog { file: Mutex::new(LineWriter::new(file)) })
    }

    pub fn write(&self, record: &Record) {
        let line = event(record).to_string();
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = writeln!(file, "{line}") {
            tracing::warn!(%error, "writing the audit log");
        }
    }
}

fn event(r: &Record) -> Value {
    let a = r.attributes;
    let mut event = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": uuid_v4(),
        "stage": if r.streamed { "ResponseStarted" } else { "ResponseComplete" },
        "requestURI": r.uri,
        "verb": a.verb,
        "user": r.user.to_json(),
        "sourceIPs": r.source_ip.iter().collect::<Vec<_>>(),
        "responseStatus": {"metadata": {}, "code": r.code},
        "requestReceivedTimestamp": r.received,
        "stageTimestamp": micro_time(),
        "annotations": {"authorization.k8s.io/decision": r.decision},
    });
    if let Some(agent) = r.user_agent {
        event["userAgent"] = json!(agent);
    }
    if a.resource_request {
        let mut object = json!({"resource": a.resource, "apiVersion": a.api_version});
        for (key, value) in [
            ("namespace", &a.namespace),
            ("name", &a.name),
            ("apiGroup", &a.api_group),
            ("subresource", &a.subresource),
        ] {
            if !value.is_empty() {
                object[key] = json!(value);
            }
        }
        event["objectRef"] = object;
    }
    event
}

/// Now, with microseconds, as audit events time their stages.
pub fn micro_time() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn uuid_v4() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

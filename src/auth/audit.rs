//! The audit log (`--audit-log-path`): one line of JSON for every request on either port, as
//! kube-apiserver's log backend writes it at level `Metadata`: an `audit.k8s.io/v1` Event with
//! who asked (user, source IP, user agent), what (verb, URI, object reference), when, the
//! answer's code, and the authorization decision. A streamed answer (a watch, logs, exec) is
//! logged when it starts (`ResponseStarted`) and again when it ends (`ResponseComplete`),
//! every other one when it is complete. The path `-` is the standard output.
//!
//! Rotation, as kube-apiserver's (`--audit-log-maxsize`, `--audit-log-maxbackup`,
//! `--audit-log-maxage`): a log that would grow past its size (100 MiB unless set, as
//! lumberjack's default) is renamed with the time of the rotation
//! (`audit-2026-12-02T14-30-00.123.log` for `audit.log`) and a new one begun; of the renamed
//! ones, those past the count to keep (the newest are kept) or the age are deleted.

use std::fs::{File, OpenOptions};
use std::io::{LineWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

use serde_json::{json, Value};

use super::attributes::Attributes;
use super::{AuthConfigError, UserInfo};

/// The log, shared by the HTTP workers: a file, or the standard output.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    /// What a rotated log's name has before and after its time (`audit-`, `.log`).
    backup_affixes: (String, String),
    rotation: Rotation,
    /// The file being written; none for the standard output.
    current: Option<Mutex<Current>>,
}

/// When the log is rotated, and which rotated logs are kept (0: no limit).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rotation {
    /// Rotate before the log grows past this many bytes; 0 is 100 MiB.
    pub max_bytes: u64,
    /// Keep this many rotated logs, the newest.
    pub max_backups: usize,
    /// Keep rotated logs no older than this.
    pub max_age: Option<Duration>,
}

/// The file being written, and how much it holds; when the log was last rotated.
#[derive(Debug)]
struct Current {
    file: LineWriter<File>,
    bytes: u64,
    rotated: Option<DateTime<Utc>>,
}

/// The time format of a rotated log's name (lumberjack's, which kube-apiserver uses).
const BACKUP_TIME: &str = "%Y-%m-%dT%H-%M-%S%.3f";

fn open_appending(path: &Path) -> std::io::Result<Current> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    let bytes = file.metadata()?.len();
    Ok(Current { file: LineWriter::new(file), bytes, rotated: None })
}

/// lumberjack's size of a log that rotates at 0 megabytes, kube-apiserver's default.
const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;

/// Past this many bytes a user agent is cut, as kube-apiserver's `maybeTruncateUserAgent`.
const MAX_USER_AGENT: usize = 1024;

/// What a request's body says of its object, noted for its audit event's `objectRef`: its
/// name (a create's, which its path lacks), uid and resourceVersion, as kube-apiserver takes
/// them from the decoded object.
#[derive(Default)]
pub struct RequestObject {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
}

/// Annotations a request's handling adds to its audit event, beside the authorization's (an
/// issued token's id, a long-lived token's Secret), as kube-apiserver's `audit.AddAuditAnnotation`.
#[derive(Default)]
pub struct Annotations(Vec<(&'static str, String)>);

/// Adds the annotation `key: value` to the audit event of `req`.
pub fn annotate(req: &actix_web::HttpRequest, key: &'static str, value: String) {
    use actix_web::HttpMessage;
    req.extensions_mut().get_or_insert_with(Annotations::default).0.push((key, value));
}

/// Notes what `object` (a request's decoded body) says of itself, when requests are audited.
pub fn note_request_object(
    req: &actix_web::HttpRequest,
    state: &crate::api::AppState,
    object: &serde_json::Value,
) {
    use actix_web::HttpMessage;
    if state.security.as_ref().is_none_or(|s| s.audit.is_none()) {
        return;
    }
    let text = |field: &str| {
        let text = object.pointer(&format!("/metadata/{field}")).and_then(Value::as_str);
        text.unwrap_or_default().to_string()
    };
    let noted = RequestObject {
        name: text("name"),
        uid: text("uid"),
        resource_version: text("resourceVersion"),
    };
    req.extensions_mut().insert(noted);
}

/// One request's record.
pub struct Record<'a> {
    /// Who sent the request.
    pub user: &'a UserInfo,
    /// Whom it impersonated, if anyone.
    pub impersonated: Option<&'a UserInfo>,
    pub attributes: &'a Attributes,
    pub uri: &'a str,
    /// Where it came from: the proxies `X-Forwarded-For` and `X-Real-Ip` name, then the peer.
    pub source_ips: Vec<String>,
    pub user_agent: Option<&'a str>,
    pub code: u16,
    pub streamed: bool,
    /// `allow`, `forbid`, or empty when the request was not authorized (a failed
    /// authentication, the insecure port).
    pub decision: &'static str,
    /// The authorizer's reason (`RBAC: allowed by ...`).
    pub reason: &'a str,
    /// For a request that failed authentication, what it attempted (`Authentication failed,
    /// attempted: bearer`): it is logged with no user, as kube-apiserver logs it.
    pub failed_authentication: Option<String>,
    pub received: &'a str,
    /// The request's `Audit-ID`, which its response echoes.
    pub audit_id: &'a str,
    /// The `Status` an error was answered with: its status, message, reason and details go
    /// in `responseStatus`, as kube-apiserver logs them.
    pub error: Option<&'a crate::error::ErrorStatus>,
    /// What the request's object said of itself.
    pub object: Option<&'a RequestObject>,
    /// What the request's handling noted for the log (see [`annotate`]).
    pub annotations: Option<&'a Annotations>,
}

impl AuditLog {
    /// Opens (appending to) the log at `path`, creating it readable by its owner only; `-`
    /// is the standard output.
    pub fn open(path: &Path, rotation: Rotation) -> Result<Self, AuthConfigError> {
        let rotation = Rotation {
            max_bytes: if rotation.max_bytes == 0 { DEFAULT_MAX_BYTES } else { rotation.max_bytes },
            ..rotation
        };
        let current = if path == Path::new("-") {
            None
        } else {
            let current = open_appending(path).map_err(|e| AuthConfigError::file(path, e))?;
            Some(Mutex::new(current))
        };
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        let extension = path.extension().map(|e| format!(".{}", e.to_string_lossy()));
        Ok(AuditLog {
            path: path.to_path_buf(),
            backup_affixes: (format!("{stem}-"), extension.unwrap_or_default()),
            rotation,
            current,
        })
    }

    /// Writes the event of `record`, and answers it (to be completed when a streamed answer
    /// ends).
    pub fn write(&self, record: &Record) -> Value {
        let event = event(record);
        self.write_line(&event.to_string());
        event
    }

    /// Writes the `ResponseComplete` stage of a streamed answer's `event`, now that it ended.
    pub fn complete(&self, mut event: Value) {
        event["stage"] = json!("ResponseComplete");
        event["stageTimestamp"] = json!(micro_time());
        self.write_line(&event.to_string());
    }

    fn write_line(&self, line: &str) {
        let Some(current) = &self.current else {
            let mut out = std::io::stdout().lock();
            if let Err(error) = writeln!(out, "{line}") {
                tracing::warn!(%error, "writing the audit log");
            }
            return;
        };
        let mut current = current.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let bytes = line.len() as u64 + 1;
        let max = self.rotation.max_bytes;
        if current.bytes > 0 && current.bytes + bytes > max {
            match self.rotate(&mut current) {
                Ok(()) => self.prune(),
                Err(error) => tracing::warn!(%error, "rotating the audit log"),
            }
        }
        match writeln!(current.file, "{line}") {
            Ok(()) => current.bytes += bytes,
            Err(error) => tracing::warn!(%error, "writing the audit log"),
        }
    }

    /// The name of a log rotated at `time`: the log's stem, the time, its extension.
    fn backup_name(&self, time: DateTime<Utc>) -> PathBuf {
        let (before, after) = &self.backup_affixes;
        self.path.with_file_name(format!("{before}{}{after}", time.format(BACKUP_TIME)))
    }

    /// When a file of the log's directory is one of its rotated logs: the time in its name.
    fn backup_time(&self, name: &str) -> Option<NaiveDateTime> {
        let (before, after) = &self.backup_affixes;
        let time = name.strip_prefix(before.as_str())?.strip_suffix(after.as_str())?;
        NaiveDateTime::parse_from_str(time, BACKUP_TIME).ok()
    }

    /// Renames the log with the time (always later than the last rotation's, and a
    /// millisecond later while that name is taken), and begins a new one. When no new one can
    /// be opened, the log keeps its name and the records their file.
    fn rotate(&self, current: &mut Current) -> std::io::Result<()> {
        current.file.flush()?;
        let mut time = Utc::now();
        if let Some(last) = current.rotated {
            time = time.max(last + chrono::Duration::milliseconds(1));
        }
        let backup = loop {
            let name = self.backup_name(time);
            if !name.exists() {
                break name;
            }
            time += chrono::Duration::milliseconds(1);
        };
        std::fs::rename(&self.path, &backup)?;
        match open_appending(&self.path) {
            Ok(new) => *current = Current { rotated: Some(time), ..new },
            Err(error) => {
                std::fs::rename(&backup, &self.path)?;
                return Err(error);
            }
        }
        Ok(())
    }

    /// Deletes the rotated logs past the count to keep or the age.
    fn prune(&self) {
        let Rotation { max_backups, max_age, .. } = self.rotation;
        if max_backups == 0 && max_age.is_none() {
            return;
        }
        let Some(dir) = self.path.parent() else { return };
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut backups: Vec<(NaiveDateTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| Some((self.backup_time(&e.file_name().to_string_lossy())?, e.path())))
            .collect();
        backups.sort_by_key(|(time, _)| std::cmp::Reverse(*time));
        let oldest = max_age.and_then(|age| chrono::Duration::from_std(age).ok());
        let oldest = oldest.map(|age| Utc::now().naive_utc() - age);
        for (i, (time, path)) in backups.iter().enumerate() {
            let surplus = max_backups > 0 && i >= max_backups;
            if surplus || oldest.is_some_and(|oldest| *time < oldest) {
                if let Err(error) = std::fs::remove_file(path) {
                    tracing::warn!(%error, path = %path.display(), "removing a rotated audit log");
                }
            }
        }
    }
}

fn event(r: &Record) -> Value {
    let a = r.attributes;
    let mut event = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": r.audit_id,
        "stage": if r.streamed { "ResponseStarted" } else { "ResponseComplete" },
        "requestURI": r.uri,
        "verb": a.verb,
        "user": r.user.to_json(),
        "sourceIPs": r.source_ips,
        "responseStatus": {"metadata": {}, "code": r.code},
        "requestReceivedTimestamp": r.received,
        "stageTimestamp": micro_time(),
    });
    if !r.decision.is_empty() {
        event["annotations"] = json!({"authorization.k8s.io/decision": r.decision,
            "authorization.k8s.io/reason": r.reason});
    }
    for (key, value) in r.annotations.map(|a| a.0.as_slice()).unwrap_or_default() {
        event["annotations"][*key] = json!(value);
    }
    if let Some(status) = r.error.and_then(|error| error.0.as_object()) {
        for key in ["status", "message", "reason", "details"] {
            if let Some(value) = status.get(key) {
                event["responseStatus"][key] = value.clone();
            }
        }
    }
    if let Some(attempted) = &r.failed_authentication {
        event["user"] = json!({});
        event["stage"] = json!("ResponseStarted");
        event["responseStatus"]["message"] = json!(attempted);
    }
    if let Some(agent) = r.user_agent {
        event["userAgent"] = json!(truncated_user_agent(agent));
    }
    if let Some(impersonated) = r.impersonated {
        event["impersonatedUser"] = impersonated.to_json();
    }
    if a.resource_request {
        let mut object = json!({"resource": a.resource, "apiVersion": a.api_version});
        let noted = |field: fn(&RequestObject) -> &str| r.object.map(field).unwrap_or_default();
        let name = if a.name.is_empty() { noted(|o| &o.name) } else { a.name.as_str() };
        for (key, value) in [
            ("namespace", a.namespace.as_str()),
            ("name", name),
            ("uid", noted(|o| &o.uid)),
            ("apiGroup", a.api_group.as_str()),
            ("resourceVersion", noted(|o| &o.resource_version)),
            ("subresource", a.subresource.as_str()),
        ] {
            if !value.is_empty() {
                object[key] = json!(value);
            }
        }
        event["objectRef"] = object;
    }
    event
}

/// A user agent as logged: past 1024 bytes, cut (at a character) and marked `...TRUNCATED`.
fn truncated_user_agent(agent: &str) -> String {
    if agent.len() <= MAX_USER_AGENT {
        return agent.to_string();
    }
    let mut end = MAX_USER_AGENT;
    while !agent.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...TRUNCATED", &agent[..end])
}

/// Where a request came from, as kube-apiserver's `SourceIPs`: the addresses
/// `X-Forwarded-For` lists, then `X-Real-Ip`'s when not listed already, then the peer's
/// unless it is the last one.
pub fn source_ips(
    headers: &actix_web::http::header::HeaderMap,
    peer: Option<String>,
) -> Vec<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let mut ips: Vec<String> = header("x-forwarded-for")
        .into_iter()
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok())
        .map(String::from)
        .collect();
    let real = header("x-real-ip").filter(|ip| ip.parse::<std::net::IpAddr>().is_ok());
    if let Some(real) = real.filter(|real| !ips.iter().any(|ip| ip == real)) {
        ips.push(real.to_string());
    }
    // The peer, which cannot be forged, unless it is the last address already.
    if let Some(peer) = peer.filter(|peer| ips.last() != Some(peer)) {
        ips.push(peer);
    }
    ips
}

/// A streamed answer's body, which calls `on_end` once when it ends or is dropped (its client
/// gone): its audit event's `ResponseComplete` stage.
pub struct Completing<B, F: FnOnce()> {
    body: std::pin::Pin<Box<B>>,
    on_end: Option<F>,
}

impl<B, F: FnOnce()> Completing<B, F> {
    pub fn new(body: B, on_end: F) -> Self {
        Self { body: Box::pin(body), on_end: Some(on_end) }
    }

    fn end(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            on_end();
        }
    }
}

impl<B, F: FnOnce()> Drop for Completing<B, F> {
    fn drop(&mut self) {
        self.end();
    }
}

impl<B: actix_web::body::MessageBody, F: FnOnce() + Unpin> actix_web::body::MessageBody
    for Completing<B, F>
{
    type Error = B::Error;

    fn size(&self) -> actix_web::body::BodySize {
        self.body.size()
    }

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<actix_web::web::Bytes, Self::Error>>> {
        let this = self.get_mut();
        let polled = this.body.as_mut().poll_next(cx);
        if let std::task::Poll::Ready(None) = polled {
            this.end();
        }
        polled
    }
}

/// Now, with microseconds, as audit events time their stages.
pub fn micro_time() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_full_log_is_rotated_and_the_newest_backups_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation { max_bytes: 100, max_backups: 2, max_age: None };
        let log = AuditLog::open(&path, rotation).unwrap();
        // 39 bytes each with its newline: two fit in 100.
        let line = |n: usize| format!("{{\"n\":\"{n:02}{}\"}}", "x".repeat(28));
        for n in 0..11 {
            log.write_line(&line(n));
        }
        let names = files(dir.path());
        assert_eq!(names.len(), 3, "the log and two backups: {names:?}");
        assert_eq!(names.last().map(String::as_str), Some("audit.log"));
        // 11 lines: five rotations of two, the newest two backups kept, in the order of the
        // times in their names; the last line in the new log.
        for (backup, first) in names[..2].iter().zip([6, 8]) {
            assert!(log.backup_time(backup).is_some(), "{backup}");
            let text = std::fs::read_to_string(dir.path().join(backup)).unwrap();
            assert_eq!(text, format!("{}\n{}\n", line(first), line(first + 1)), "{backup}");
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{}\n", line(10)));
    }

    #[test]
    fn source_ips_are_the_proxies_then_the_peer_unless_last() {
        let mut headers = actix_web::http::header::HeaderMap::new();
        let mut set = |name: &'static str, value: &'static str| {
            let value = actix_web::http::header::HeaderValue::from_static(value);
            headers.insert(actix_web::http::header::HeaderName::from_static(name), value);
        };
        set("x-forwarded-for", "10.0.0.1, junk, 127.0.0.1");
        set("x-real-ip", "10.0.0.1");
        let ips = source_ips(&headers, Some("127.0.0.1".into()));
        assert_eq!(ips, ["10.0.0.1", "127.0.0.1"], "the peer is the last already");
        let ips = source_ips(&headers, Some("10.0.0.1".into()));
        assert_eq!(ips, ["10.0.0.1", "127.0.0.1", "10.0.0.1"], "a forged first is not the peer");
        let agent = format!("a{}", "é".repeat(600));
        assert_eq!(
            truncated_user_agent(&agent).len(),
            1023 + "...TRUNCATED".len(),
            "at a character"
        );
    }

    #[test]
    fn backups_past_their_age_go_and_other_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit");
        let old = dir.path().join("audit-2020-01-01T00-00-00.000");
        std::fs::write(&old, "old\n").unwrap();
        std::fs::write(dir.path().join("audit-notes.txt"), "mine\n").unwrap();
        let day = Duration::from_secs(24 * 3600);
        let rotation = Rotation { max_bytes: 10, max_backups: 0, max_age: Some(day) };
        let log = AuditLog::open(&path, rotation).unwrap();
        log.write_line("first line");
        log.write_line("second line");
        let names = files(dir.path());
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(!old.exists() && names.contains(&"audit-notes.txt".to_string()), "{names:?}");
        assert!(log.rotation.max_bytes == 10 && log.backup_time("audit.log").is_none());
    }
}

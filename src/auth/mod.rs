//! The secure port's guard, as kube-apiserver's filters keep it: who a request is
//! ([`authn`]: a client certificate signed by the client CA, a bearer token of the token file,
//! HTTP basic credentials of the basic auth file, or anonymous), what it asks
//! ([`attributes`]), whether that is allowed ([`authz`]: AlwaysAllow, AlwaysDeny, an ABAC
//! policy file, or [`rbac`]'s roles and bindings), the audit log of every request on either port ([`audit`]), the TLS set-up
//! ([`tls`]) and the middleware that runs them in that order ([`filter`]).

use std::collections::BTreeMap;

pub mod attributes;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod escalation;
pub mod filter;
pub mod impersonation;
pub mod rbac;
pub mod tls;
pub mod tokens;

pub use filter::Security;

/// Who a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Further attributes (an impersonating request's `Impersonate-Extra-*`).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Every authenticated user's group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of a request without credentials, and its user.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
pub const ANONYMOUS: &str = "system:anonymous";
/// How a service account's user name starts (`system:serviceaccount:NS:NAME`).
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The namespace and name of the service account a user name is, if it is one.
pub fn service_account_of(user_name: &str) -> Option<(&str, &str)> {
    user_name.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')
}

/// The groups of the service accounts of `namespace`.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]
}

impl UserInfo {
    /// An authenticated user: its groups and `system:authenticated`.
    pub fn authenticated(name: &str, uid: &str, mut groups: Vec<String>) -> Self {
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        UserInfo { name: name.into(), uid: uid.into(), groups, extra: BTreeMap::new() }
    }

    /// The anonymous user of a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.into(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.into()],
            extra: BTreeMap::new(),
        }
    }

    /// The user service account `namespace`/`name` is: `system:serviceaccount:NS:NAME`, of the
    /// groups of every account and of its namespace's.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        let name = format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}");
        UserInfo::authenticated(&name, uid, service_account_groups(namespace))
    }

    /// Who a request on the insecure port is, as kube-apiserver's insecure port had it.
    pub fn unsecured() -> Self {
        UserInfo {
            name: "system:unsecured".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), AUTHENTICATED.into()],
            extra: BTreeMap::new(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut user = serde_json::json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            user["uid"] = serde_json::json!(self.uid);
        }
        if !self.extra.is_empty() {
            user["extra"] = serde_json::json!(self.extra);
        }
        user
    }
}

/// A settings file that cannot be used (start-up stops, naming it).
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

impl AuthConfigError {
    pub fn file(path: &std::path::Path, message: impl std::fmt::Display) -> Self {
        AuthConfigError::File { path: path.display().to_string(), message: message.to_string() }
    }
}

/// Writes a file the server makes for itself (a key, a certificate) with `mode`.
fn write_new_file(path: &std::path::Path, text: &str, mode: u32) -> Result<(), AuthConfigError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(mode)
        .open(path)
        .map_err(|e| AuthConfigError::file(path, e))?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .map_err(|e| AuthConfigError::file(path, e))
}

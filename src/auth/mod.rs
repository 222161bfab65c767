//! The secure port's guard, as kube-apiserver's filters keep it: who a request is
//! ([`authn`]: a client certificate signed by the client CA, a bearer token of the token file,
//! HTTP basic credentials of the basic auth file, or anonymous), what it asks
//! ([`attributes`]), whether that is allowed ([`authz`]: AlwaysAllow, AlwaysDeny, an ABAC
//! policy file, or [`rbac`]'s roles and bindings), the audit log of every request on either port ([`audit`]), the TLS set-up
//! ([`tls`]) and the middleware that runs them in that order ([`filter`]).

pub mod attributes;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod escalation;
pub mod filter;
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
}

/// Every authenticated user's group.
pub const AUTHENTICATED: &str = "system:authenticated";

impl UserInfo {
    /// An authenticated user: its groups and `system:authenticated`.
    pub fn authenticated(name: &str, uid: &str, mut groups: Vec<String>) -> Self {
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        UserInfo { name: name.into(), uid: uid.into(), groups }
    }

    /// The anonymous user of a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// Who a request on the insecure port is, as kube-apiserver's insecure port had it.
    pub fn unsecured() -> Self {
        UserInfo {
            name: "system:unsecured".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), AUTHENTICATED.into()],
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut user = serde_json::json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            user["uid"] = serde_json::json!(self.uid);
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

//! Authentication, as kube-apiserver's union of authenticators does it, in its order: a client
//! certificate (verified against the client CA during the TLS handshake; CN is the user, each
//! O a group), else the `Authorization` header: `Bearer` with a token of the token file
//! (`--token-auth-file`, CSV lines `token,user,uid,"group1,group2"`) or `Basic` with a user of
//! the basic auth file (`--basic-auth-file`, `password,user,uid,"group1,group2"`). Credentials
//! given but wrong are refused (401) even when anonymous requests are allowed; none at all make
//! the request anonymous, when that is on.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use actix_web::http::header::{HeaderMap, AUTHORIZATION};
use base64::Engine;

use super::{AuthConfigError, UserInfo};

/// The user a verified client certificate names (kept with its connection).
#[derive(Debug, Clone)]
pub struct CertificateUser(pub UserInfo);

/// A client certificate the client CA does not vouch for (or that names no user): its
/// connection's requests are 401 unless their credentials name a user.
#[derive(Debug, Clone, Copy)]
pub struct CertificateRejected;

/// The outcome of authenticating a request.
#[derive(Debug, PartialEq)]
pub enum Authenticated {
    User(UserInfo),
    /// No credentials at all.
    Missing,
    /// Credentials that name nobody.
    Invalid,
}

/// The static credentials.
#[derive(Default)]
pub struct Authenticator {
    tokens: HashMap<String, UserInfo>,
    /// By user name: the password and the user.
    passwords: HashMap<String, (String, UserInfo)>,
}

/// Reads a CSV credentials file: `secret,user,uid[,"groups"]` a line.
fn read_csv(path: &Path) -> Result<Vec<(String, UserInfo)>, AuthConfigError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| AuthConfigError::file(path, e))?;
    let mut entries = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| AuthConfigError::file(path, e))?;
        let line = record.position().map_or(0, |p| p.line());
        let field = |i: usize| record.get(i).unwrap_or("").to_string();
        let (secret, user, uid) = (field(0), field(1), field(2));
        if secret.is_empty() || user.is_empty() {
            let message = format!("line {line}: needs at least a secret and a user name");
            return Err(AuthConfigError::file(path, message));
        }
        let groups: Vec<String> = field(3)
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect();
        entries.push((secret, UserInfo::authenticated(&user, &uid, groups)));
    }
    Ok(entries)
}

/// Counts only: the secrets stay out of logs.
impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("tokens", &self.tokens.len())
            .field("passwords", &self.passwords.len())
            .finish()
    }
}

impl Authenticator {
    pub fn load(
        token_file: Option<&Path>,
        basic_auth_file: Option<&Path>,
    ) -> Result<Self, AuthConfigError> {
        let mut authenticator = Authenticator::default();
        if let Some(path) = token_file {
            authenticator.tokens = read_csv(path)?.into_iter().collect();
        }
        if let Some(path) = basic_auth_file {
            for (password, user) in read_csv(path)? {
                authenticator.passwords.insert(user.name.clone(), (password, user));
            }
        }
        Ok(authenticator)
    }

    /// The user of a token of the token file.
    pub fn token_user(&self, token: &str) -> Option<UserInfo> {
        self.tokens.get(token).cloned()
    }

    /// Who the request is, from its certificate's user or its `Authorization` header.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        certificate: Option<&CertificateUser>,
    ) -> Authenticated {
        if let Some(CertificateUser(user)) = certificate {
            return Authenticated::User(user.clone());
        }
        if let Some(token) = bearer_token(headers) {
            return self.token_user(&token).map_or(Authenticated::Invalid, Authenticated::User);
        }
        let Some(header) = headers.get(AUTHORIZATION) else { return Authenticated::Missing };
        let header = header.to_str().unwrap_or("");
        let (scheme, credentials) = header.split_once(' ').unwrap_or((header, ""));
        let credentials = credentials.trim();
        // Basic credentials only when a basic auth file is configured (Kubernetes has none).
        if scheme.eq_ignore_ascii_case("basic") && !self.passwords.is_empty() {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(credentials)
                .ok()
                .and_then(|d| String::from_utf8(d).ok());
            let known =
                decoded.as_deref().and_then(|d| d.split_once(':')).and_then(|(name, password)| {
                    let (expected, user) = self.passwords.get(name)?;
                    // Compared whole: both sides are read to their ends either way.
                    let same = expected.len() == password.len()
                        && expected.bytes().zip(password.bytes()).fold(0, |d, (a, b)| d | (a ^ b))
                            == 0;
                    same.then(|| user.clone())
                });
            return known.map_or(Authenticated::Invalid, Authenticated::User);
        }
        // Another scheme, or a bearer without a token, names no one: Kubernetes' bearer
        // authenticator passes over such a header, and the request is anonymous.
        Authenticated::Missing
    }
}

/// The bearer token a request carries: an `Authorization: Bearer` header's second
/// space-separated field, as Kubernetes reads it (`Bearer tok extra` is `tok`; `Bearer ` has
/// none), else, for a WebSocket upgrade (which browsers cannot give headers), the
/// `base64url.bearer.authorization.k8s.io.<token>` subprotocol it offers, as kube-apiserver's
/// WebSocket protocol authenticator reads it.
pub fn bearer_token(headers: &HeaderMap) -> Option<Cow<'_, str>> {
    let from_header = || {
        let header = headers.get(AUTHORIZATION)?.to_str().ok()?;
        let mut fields = header.splitn(3, ' ');
        let scheme = fields.next()?;
        let token = fields.next().filter(|token| !token.is_empty())?;
        scheme.eq_ignore_ascii_case("bearer").then_some(Cow::Borrowed(token))
    };
    from_header().or_else(|| websocket_token(headers).map(Cow::Owned))
}

/// The subprotocol prefix that carries a bearer token in a WebSocket upgrade.
const WEBSOCKET_BEARER: &str = "base64url.bearer.authorization.k8s.io.";

/// The token a WebSocket upgrade offers as a subprotocol (base64url, unpadded), if it offers
/// exactly one.
fn websocket_token(headers: &HeaderMap) -> Option<String> {
    let has = |name: &str, token: &str| {
        let values = headers.get_all(name).filter_map(|v| v.to_str().ok());
        values.flat_map(|v| v.split(',')).any(|v| v.trim().eq_ignore_ascii_case(token))
    };
    if !has("connection", "upgrade") || !has("upgrade", "websocket") {
        return None;
    }
    let protocols = headers.get_all("sec-websocket-protocol").filter_map(|v| v.to_str().ok());
    let mut tokens = protocols
        .flat_map(|v| v.split(','))
        .filter_map(|protocol| protocol.trim().strip_prefix(WEBSOCKET_BEARER));
    let (token, None) = (tokens.next()?, tokens.next()) else { return None };
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
    String::from_utf8(decoded).ok().filter(|token| !token.is_empty())
}

/// The user a client certificate names: its subject's CN, and each O as a group.
pub fn certificate_user(der: &[u8]) -> Option<UserInfo> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let groups =
        subject.iter_organization().filter_map(|o| o.as_str().ok()).map(String::from).collect();
    Some(UserInfo::authenticated(&name, "", groups))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(authorization).unwrap());
        headers
    }

    #[test]
    fn tokens_and_passwords_name_their_users_with_their_groups() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            "# a comment\nsecret-a,alice,1001,\"dev, ops\"\nsecret-b,bob,1002\n",
        )
        .unwrap();
        let basic = dir.path().join("basic.csv");
        std::fs::write(&basic, "pw,carol,1003,readers\n").unwrap();
        let authn = Authenticator::load(Some(&tokens), Some(&basic)).unwrap();
        let alice = UserInfo::authenticated("alice", "1001", vec!["dev".into(), "ops".into()]);
        assert_eq!(
            authn.authenticate(&headers("Bearer secret-a"), None),
            Authenticated::User(alice)
        );
        assert_eq!(authn.authenticate(&headers("Bearer nope"), None), Authenticated::Invalid);
        let carol = base64::engine::general_purpose::STANDARD.encode("carol:pw");
        let Authenticated::User(user) =
            authn.authenticate(&headers(&format!("Basic {carol}")), None)
        else {
            panic!("carol is known")
        };
        assert_eq!(user.groups, ["readers", "system:authenticated"]);
        let wrong = base64::engine::general_purpose::STANDARD.encode("carol:pX");
        assert_eq!(
            authn.authenticate(&headers(&format!("Basic {wrong}")), None),
            Authenticated::Invalid
        );
        assert_eq!(authn.authenticate(&HeaderMap::new(), None), Authenticated::Missing);
        // As Kubernetes reads the header: a token is its second field; another scheme, or no
        // token, names no one (the request is anonymous).
        assert_eq!(
            authn.authenticate(&headers("Bearer secret-b extra"), None),
            Authenticated::User(UserInfo::authenticated("bob", "1002", vec![]))
        );
        let tokens_only = Authenticator::load(Some(&tokens), None).unwrap();
        let basic = format!("Basic {carol}");
        assert_eq!(tokens_only.authenticate(&headers(&basic), None), Authenticated::Missing);
        for nobody in ["Bearer ", "Bearer", "Weird xyz", "Bearer  secret-b"] {
            assert_eq!(
                authn.authenticate(&headers(nobody), None),
                Authenticated::Missing,
                "{nobody}"
            );
        }
        let by_certificate = CertificateUser(UserInfo::authenticated("dave", "", vec![]));
        let Authenticated::User(dave) =
            authn.authenticate(&headers("Bearer nope"), Some(&by_certificate))
        else {
            panic!("the certificate's user")
        };
        assert_eq!(dave.name, "dave");
    }

    #[test]
    fn a_websocket_upgrade_may_carry_its_token_as_a_subprotocol() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, "secret-a,alice,1001\n").unwrap();
        let authn = Authenticator::load(Some(&tokens), None).unwrap();
        let upgrade = |protocols: &str| {
            let mut headers = HeaderMap::new();
            let mut set = |name: &'static str, value: &str| {
                headers.insert(
                    actix_web::http::header::HeaderName::from_static(name),
                    HeaderValue::from_str(value).unwrap(),
                );
            };
            set("connection", "Upgrade");
            set("upgrade", "websocket");
            set("sec-websocket-protocol", protocols);
            headers
        };
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("secret-a");
        let offered = format!("v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.{encoded}");
        let alice = UserInfo::authenticated("alice", "1001", vec![]);
        assert_eq!(authn.authenticate(&upgrade(&offered), None), Authenticated::User(alice));
        let wrong = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("nope");
        let wrong = format!("base64url.bearer.authorization.k8s.io.{wrong}");
        assert_eq!(authn.authenticate(&upgrade(&wrong), None), Authenticated::Invalid);
        // Two tokens, or none, name no one; nor does the subprotocol outside an upgrade.
        let twice = format!("{offered}, base64url.bearer.authorization.k8s.io.{encoded}");
        assert_eq!(authn.authenticate(&upgrade(&twice), None), Authenticated::Missing);
        assert_eq!(authn.authenticate(&upgrade("v5.channel.k8s.io"), None), Authenticated::Missing);
        let mut plain = upgrade(&offered);
        plain.remove("upgrade");
        assert_eq!(authn.authenticate(&plain, None), Authenticated::Missing);
    }

    #[test]
    fn a_line_without_a_user_is_refused_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, "a,alice,1\nlonely\n").unwrap();
        let error = Authenticator::load(Some(&tokens), None).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
    }

    #[test]
    fn a_certificate_names_its_user_and_groups() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "dave");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "devs");
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let user = certificate_user(certificate.der()).unwrap();
        assert_eq!(
            (user.name.as_str(), user.groups),
            ("dave", vec!["devs".into(), "system:authenticated".into()])
        );
    }
}

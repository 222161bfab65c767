//! Service account tokens, as Kubernetes' TokenRequest issues them: JWTs signed (ES256) with
//! the key in `DATA_DIR/pki/sa.key` (made at the first start, kept across restarts, as
//! kube-apiserver's `--service-account-signing-key-file`), naming the account
//! (`system:serviceaccount:NS:NAME`, its uid), the issuer and audiences, and when they expire.
//! A token is good while its signature, issuer, audience and time hold and its account still
//! exists with the uid it names: deleting the account revokes its tokens.
//!
//! The same key signs the long-lived tokens of service account token Secrets (issuer
//! `kubernetes/serviceaccount`, no audience, no expiry, as Kubernetes' legacy tokens), which
//! are good while their Secret still holds them as well.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use kplane_actors::core::token_request::{BoundObject, GrantSigner, TokenGrant};

use super::{AuthConfigError, UserInfo};

/// The issuer, and the audience tokens are for unless they ask for others.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer of the tokens in service account token Secrets.
const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// Signs and checks tokens.
pub struct TokenIssuer {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// The key's id, in every token's header: Kubernetes' (SHA-256 of the public key's DER).
    key_id: String,
    /// The public key as a JSON Web Key (the issuer's `jwks_uri` serves it).
    public_key: serde_json::Value,
    /// Where the issuer's discovery document says its keys are.
    jwks_uri: String,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenIssuer")
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    /// Optional, as in Kubernetes: a token is not taken before it.
    #[serde(default)]
    nbf: i64,
    iss: String,
    /// Optional, as in Kubernetes (the credential id, when given).
    #[serde(default)]
    jti: String,
    sub: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
}

#[derive(Debug, Serialize, Deserialize)]
struct KubernetesClaims {
    namespace: String,
    serviceaccount: AccountRef,
    /// What the token is bound to: it is good only while that is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<AccountRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<AccountRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<AccountRef>,
    /// When an extended token's asked lifetime ended (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warnafter: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct AccountRef {
    name: String,
    /// Left out when unknown (a pod's node that was not found).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    uid: String,
}

impl From<&BoundObject> for AccountRef {
    fn from(object: &BoundObject) -> Self {
        AccountRef { name: object.name.clone(), uid: object.uid.clone() }
    }
}

impl From<AccountRef> for BoundObject {
    fn from(object: AccountRef) -> Self {
        BoundObject { name: object.name, uid: object.uid }
    }
}

/// What a Secret's long-lived token says, in Kubernetes' claims.
#[derive(Debug, Serialize, Deserialize)]
struct LegacyClaims {
    iss: String,
    sub: String,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    secret: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    uid: String,
}

/// The account a good token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenAccount {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub audiences: Vec<String>,
    /// The Secret a long-lived token is kept in (it is good only while it is there).
    pub secret: Option<String>,
    /// The token's `jti` (a token request's, not a Secret's).
    pub token_id: Option<String>,
    /// The pod, Secret or node the token is bound to (a token request's).
    pub pod: Option<BoundObject>,
    pub bound_secret: Option<BoundObject>,
    pub node: Option<BoundObject>,
}

impl TokenAccount {
    /// The user the account is; with a token id, the extra
    /// `authentication.kubernetes.io/credential-id: ["JTI=..."]`, as Kubernetes 1.32 adds it,
    /// and the pod and node a bound token names.
    pub fn user(&self) -> UserInfo {
        let mut user = UserInfo::service_account(&self.namespace, &self.name, &self.uid);
        let bound = [("pod", &self.pod), ("node", &self.node)];
        for (kind, object) in bound.iter().filter_map(|(k, o)| Some((k, o.as_ref()?))) {
            let key = |what: &str| format!("authentication.kubernetes.io/{kind}-{what}");
            user.extra.insert(key("name"), vec![object.name.clone()]);
            if !object.uid.is_empty() {
                user.extra.insert(key("uid"), vec![object.uid.clone()]);
            }
        }
        if let Some(id) = &self.token_id {
            user.extra.insert(CREDENTIAL_ID.into(), vec![format!("JTI={id}")]);
        }
        user
    }
}

/// The user extra naming the credential a request was authenticated with.
const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

impl TokenIssuer {
    /// The issuer with the key in `data_dir/pki/sa.key`, made if missing.
    pub fn load_or_create(data_dir: &Path) -> Result<Self, AuthConfigError> {
        let dir = data_dir.join("pki");
        let path = dir.join("sa.key");
        let pem = match std::fs::read_to_string(&path) {
            Ok(pem) => pem,
            // Made only when there is none: a key that cannot be read is an error, never
            // replaced (every token signed with it would stop working).
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(AuthConfigError::file(&path, e));
            }
            Err(_) => {
                std::fs::create_dir_all(&dir).map_err(|e| AuthConfigError::file(&dir, e))?;
                let key = rcgen::KeyPair::generate()
                    .map_err(|e| AuthConfigError::file(&path, format!("generating a key: {e}")))?;
                let pem = key.serialize_pem();
                super::write_new_file(&path, &pem, 0o600)?;
                pem
            }
        };
        let key = rcgen::KeyPair::from_pem(&pem).map_err(|e| AuthConfigError::file(&path, e))?;
        let encoding = EncodingKey::from_ec_pem(pem.as_bytes())
            .map_err(|e| AuthConfigError::file(&path, e))?;
        let decoding = DecodingKey::from_ec_pem(key.public_key_pem().as_bytes())
            .map_err(|e| AuthConfigError::file(&path, e))?;
        let (key_id, public_key) =
            json_web_key(&key).ok_or_else(|| AuthConfigError::file(&path, "not a P-256 key"))?;
        let jwks_uri = String::new();
        Ok(TokenIssuer { encoding, decoding, key_id, public_key, jwks_uri })
    }

    /// The issuer whose discovery document says its keys are at `url`.
    pub fn with_jwks_uri(mut self, url: String) -> Self {
        self.jwks_uri = url;
        self
    }

    /// The issuer's OpenID Connect discovery document (`/.well-known/openid-configuration`),
    /// as Kubernetes writes it: enough for a relying party to find the keys.
    pub fn discovery_document(&self) -> serde_json::Value {
        serde_json::json!({
            "issuer": ISSUER,
            "jwks_uri": self.jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }

    /// The JSON Web Key Set of the keys that sign tokens (`/openid/v1/jwks`).
    pub fn key_set(&self) -> serde_json::Value {
        serde_json::json!({"keys": [self.public_key]})
    }

    /// The header Kubernetes' signer writes: the algorithm and the key's id (no `typ`).
    fn header(&self) -> Header {
        Header { kid: Some(self.key_id.clone()), typ: None, ..Header::new(Algorithm::ES256) }
    }

    /// The account a token names, if its signature, issuer, time and audience hold (the
    /// account's existence, and a long-lived token's Secret's, are the caller's to check).
    /// `audiences`: those the token must be for one of (the issuer when empty); a long-lived
    /// token is for the issuer's only.
    pub fn verify(&self, token: &str, audiences: &[String]) -> Option<TokenAccount> {
        if issuer_of(token)? == LEGACY_ISSUER {
            return self.verify_legacy(token, audiences);
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[ISSUER]);
        let wanted: Vec<&str> = if audiences.is_empty() {
            vec![ISSUER]
        } else {
            audiences.iter().map(String::as_str).collect()
        };
        validation.set_audience(&wanted);
        // A minute either side of its times, as Kubernetes' validator allows for clocks.
        validation.leeway = 60;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation).ok()?;
        let claims = data.claims;
        Some(TokenAccount {
            namespace: claims.kubernetes.namespace,
            name: claims.kubernetes.serviceaccount.name,
            uid: claims.kubernetes.serviceaccount.uid,
            audiences: claims.aud,
            secret: None,
            token_id: Some(claims.jti).filter(|jti| !jti.is_empty()),
            pod: claims.kubernetes.pod.map(BoundObject::from),
            bound_secret: claims.kubernetes.secret.map(BoundObject::from),
            node: claims.kubernetes.node.map(BoundObject::from),
        })
    }

    fn verify_legacy(&self, token: &str, audiences: &[String]) -> Option<TokenAccount> {
        if !audiences.is_empty() && !audiences.iter().any(|a| a == ISSUER) {
            return None;
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[LEGACY_ISSUER]);
        validation.set_required_spec_claims(&["iss", "sub"]);
        validation.validate_exp = false;
        validation.validate_aud = false;
        let claims =
            jsonwebtoken::decode::<LegacyClaims>(token, &self.decoding, &validation).ok()?.claims;
        // As Kubernetes' legacy validator: every claim given, and `sub` the same account.
        let given = [&claims.namespace, &claims.secret, &claims.name, &claims.uid];
        let subject = super::service_account_of(&claims.sub);
        if given.iter().any(|claim| claim.is_empty())
            || subject != Some((claims.namespace.as_str(), claims.name.as_str()))
        {
            return None;
        }
        Some(TokenAccount {
            namespace: claims.namespace,
            name: claims.name,
            uid: claims.uid,
            audiences: vec![ISSUER.into()],
            secret: Some(claims.secret),
            token_id: None,
            pod: None,
            bound_secret: None,
            node: None,
        })
    }
}

/// The `iss` claim of a JWT, read without checking anything.
fn issuer_of(token: &str) -> Option<String> {
    use base64::Engine;
    #[derive(Deserialize)]
    struct Issuer {
        iss: String,
    }
    let payload = token.split('.').nth(1)?;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice::<Issuer>(&payload).ok().map(|claims| claims.iss)
}

/// The tokens TokenRequests issue.
impl GrantSigner for TokenIssuer {
    fn api_audiences(&self) -> Vec<String> {
        vec![ISSUER.to_string()]
    }

    fn sign_grant(&self, grant: &TokenGrant) -> Result<String, String> {
        let account = &grant.account;
        let claims = Claims {
            aud: grant.audiences.clone(),
            exp: grant.expires_at,
            iat: grant.issued_at,
            nbf: grant.issued_at,
            iss: ISSUER.into(),
            jti: uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string(),
            sub: UserInfo::service_account(&grant.namespace, &account.name, &account.uid).name,
            kubernetes: KubernetesClaims {
                namespace: grant.namespace.clone(),
                serviceaccount: account.into(),
                pod: grant.pod.as_ref().map(AccountRef::from),
                secret: grant.secret.as_ref().map(AccountRef::from),
                node: grant.node.as_ref().map(AccountRef::from),
                warnafter: grant.warn_after,
            },
        };
        jsonwebtoken::encode(&self.header(), &claims, &self.encoding).map_err(|e| e.to_string())
    }
}

/// The long-lived tokens of service account token Secrets, which the tokens controller asks for.
impl kplane_actors::controllers::TokenSigner for TokenIssuer {
    fn sign(
        &self,
        namespace: &str,
        account: &str,
        uid: &str,
        secret: &str,
    ) -> Result<String, String> {
        let claims = LegacyClaims {
            iss: LEGACY_ISSUER.into(),
            sub: UserInfo::service_account(namespace, account, uid).name,
            namespace: namespace.into(),
            secret: secret.into(),
            name: account.into(),
            uid: uid.into(),
        };
        jsonwebtoken::encode(&self.header(), &claims, &self.encoding).map_err(|e| e.to_string())
    }
}

/// A P-256 key's id, as Kubernetes names its signing keys (the unpadded base64url of the
/// SHA-256 of its public key's DER), and its public part as a JSON Web Key.
fn json_web_key(key: &rcgen::KeyPair) -> Option<(String, serde_json::Value)> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use sha2::Digest;
    // The uncompressed point: 0x04, then x and y.
    let point = key.public_key_raw();
    if point.len() != 65 || point[0] != 4 {
        return None;
    }
    let key_id = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(key.public_key_der()));
    let jwk = serde_json::json!({"use": "sig", "kty": "EC", "kid": key_id, "crv": "P-256",
        "alg": "ES256", "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..])});
    Some((key_id, jwk))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A token of the account `team/ci`, of uid `u-1`, for the API server, good for `seconds`.
    fn team_ci(seconds: i64) -> TokenGrant {
        let now = chrono::Utc::now().timestamp();
        TokenGrant {
            namespace: "team".into(),
            account: BoundObject { name: "ci".into(), uid: "u-1".into() },
            audiences: vec![ISSUER.into()],
            issued_at: now,
            expires_at: now + seconds,
            warn_after: None,
            pod: None,
            secret: None,
            node: None,
        }
    }

    /// `grant`, signed.
    fn issued(issuer: &TokenIssuer, grant: &TokenGrant) -> String {
        issuer.sign_grant(grant).unwrap()
    }

    #[test]
    fn tokens_name_their_account_until_they_expire() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = TokenIssuer::load_or_create(dir.path()).unwrap();
        let token = issued(&issuer, &team_ci(600));
        let verified = issuer.verify(&token, &[]).unwrap();
        assert_eq!((verified.name.as_str(), verified.uid.as_str()), ("ci", "u-1"));
        assert_eq!(verified.user().name, "system:serviceaccount:team:ci");
        let id = verified.user().extra["authentication.kubernetes.io/credential-id"].clone();
        assert!(id.len() == 1 && id[0].starts_with("JTI=") && id[0].len() > 10, "{id:?}");
        assert!(verified.user().groups.contains(&"system:serviceaccounts:team".to_string()));
        // The same key after a restart; another key refuses it.
        assert!(TokenIssuer::load_or_create(dir.path()).unwrap().verify(&token, &[]).is_some());
        let other = tempfile::tempdir().unwrap();
        assert!(TokenIssuer::load_or_create(other.path()).unwrap().verify(&token, &[]).is_none());
        // Expired, or for another audience: refused.
        let old = issued(&issuer, &team_ci(-70));
        assert!(issuer.verify(&old, &[]).is_none());
        let just = issued(&issuer, &team_ci(-10));
        assert!(issuer.verify(&just, &[]).is_some(), "a minute's leeway");
        let vault = TokenGrant { audiences: vec!["vault".into()], ..team_ci(600) };
        let for_vault = issued(&issuer, &vault);
        assert!(issuer.verify(&for_vault, &[]).is_none());
        assert!(issuer.verify(&for_vault, &["vault".to_string()]).is_some());
        assert!(issuer.verify("not.a.token", &[]).is_none());
        // Signed by the issuer's key: one without an id is taken, one not valid yet is not.
        let now = chrono::Utc::now().timestamp();
        let signed = |jti: &str, nbf: i64| {
            let claims = Claims {
                aud: vec![ISSUER.into()],
                exp: now + 600,
                iat: now,
                nbf,
                iss: ISSUER.into(),
                jti: jti.into(),
                sub: "system:serviceaccount:team:ci".into(),
                kubernetes: KubernetesClaims {
                    namespace: "team".into(),
                    serviceaccount: AccountRef { name: "ci".into(), uid: "u-1".into() },
                    pod: None,
                    secret: None,
                    node: None,
                    warnafter: None,
                },
            };
            jsonwebtoken::encode(&issuer.header(), &claims, &issuer.encoding).unwrap()
        };
        let anonymous_id = issuer.verify(&signed("", now), &[]).expect("no jti needed");
        assert_eq!(anonymous_id.token_id, None);
        assert!(issuer.verify(&signed("id", now + 120), &[]).is_none(), "not valid before nbf");
    }

    /// A token bound to a pod names it and its node, as Kubernetes' claims do, and its user
    /// carries them as extras (a node's uid only when known); an extended one says when it
    /// should have been renewed.
    #[test]
    fn a_bound_token_names_its_pod_and_node() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = TokenIssuer::load_or_create(dir.path()).unwrap();
        let grant = TokenGrant {
            pod: Some(BoundObject { name: "web".into(), uid: "p-1".into() }),
            node: Some(BoundObject { name: "n1".into(), uid: String::new() }),
            warn_after: Some(123),
            ..team_ci(600)
        };
        let token = issued(&issuer, &grant);
        let claims = issuer_claims(&token);
        assert_eq!(
            claims["kubernetes.io"],
            json!({"namespace": "team", "serviceaccount": {"name": "ci", "uid": "u-1"},
                "pod": {"name": "web", "uid": "p-1"}, "node": {"name": "n1"}, "warnafter": 123})
        );
        let verified = issuer.verify(&token, &[]).unwrap();
        let extra = verified.user().extra;
        assert_eq!(extra["authentication.kubernetes.io/pod-name"], ["web"]);
        assert_eq!(extra["authentication.kubernetes.io/pod-uid"], ["p-1"]);
        assert_eq!(extra["authentication.kubernetes.io/node-name"], ["n1"]);
        assert!(!extra.contains_key("authentication.kubernetes.io/node-uid"), "{extra:?}");
    }

    #[test]
    fn a_secrets_long_lived_token_names_its_account_and_secret() {
        use kplane_actors::controllers::TokenSigner;
        let dir = tempfile::tempdir().unwrap();
        let issuer = TokenIssuer::load_or_create(dir.path()).unwrap();
        let token = issuer.sign("team", "ci", "u-1", "ci-token").unwrap();
        let verified = issuer.verify(&token, &[]).unwrap();
        assert_eq!(verified.user().name, "system:serviceaccount:team:ci");
        assert!(verified.user().extra.is_empty(), "a Secret's token has no id");
        assert_eq!((verified.uid.as_str(), verified.secret.as_deref()), ("u-1", Some("ci-token")));
        assert_eq!(verified.audiences, [ISSUER]);
        // Kubernetes' claims, which tools read.
        let claims = issuer_claims(&token);
        assert_eq!(claims["iss"], "kubernetes/serviceaccount");
        assert_eq!(claims["sub"], "system:serviceaccount:team:ci");
        assert_eq!(claims["kubernetes.io/serviceaccount/secret.name"], "ci-token");
        assert_eq!(claims["kubernetes.io/serviceaccount/service-account.uid"], "u-1");
        assert!(claims.get("exp").is_none() && claims.get("aud").is_none());
        // For the API server only; another key's is refused.
        assert!(issuer.verify(&token, &[ISSUER.to_string()]).is_some());
        assert!(issuer.verify(&token, &["vault".to_string()]).is_none());
        let other = tempfile::tempdir().unwrap();
        let forged = TokenIssuer::load_or_create(other.path()).unwrap();
        assert!(issuer.verify(&forged.sign("team", "ci", "u-1", "x").unwrap(), &[]).is_none());
        // Signed by the key, but its subject another account's, or a claim missing: refused.
        let legacy = |sub: &str, secret: &str| LegacyClaims {
            iss: LEGACY_ISSUER.into(),
            sub: sub.into(),
            namespace: "team".into(),
            secret: secret.into(),
            name: "ci".into(),
            uid: "u-1".into(),
        };
        let signed = |claims: &LegacyClaims| {
            jsonwebtoken::encode(&issuer.header(), claims, &issuer.encoding).unwrap()
        };
        let good = signed(&legacy("system:serviceaccount:team:ci", "ci-token"));
        assert!(issuer.verify(&good, &[]).is_some());
        let admin = signed(&legacy("system:serviceaccount:kube-system:admin", "ci-token"));
        assert!(issuer.verify(&admin, &[]).is_none());
        let no_secret = signed(&legacy("system:serviceaccount:team:ci", ""));
        assert!(issuer.verify(&no_secret, &[]).is_none());
    }

    #[test]
    fn tokens_name_their_key_which_the_key_set_holds() {
        use kplane_actors::controllers::TokenSigner;
        let dir = tempfile::tempdir().unwrap();
        let issuer = TokenIssuer::load_or_create(dir.path()).unwrap();
        let keys = issuer.key_set();
        let key = &keys["keys"][0];
        assert_eq!(
            (&key["kty"], &key["crv"], &key["alg"], &key["use"]),
            (&json!("EC"), &json!("P-256"), &json!("ES256"), &json!("sig"))
        );
        for token in [issued(&issuer, &team_ci(600)), issuer.sign("team", "ci", "u", "s").unwrap()]
        {
            assert_eq!(
                jsonwebtoken::decode_header(&token).unwrap().kid.as_deref(),
                key["kid"].as_str()
            );
            // The key set's key checks the token: what a relying party does with it.
            let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.clone()).unwrap();
            let decoding = DecodingKey::from_jwk(&jwk).unwrap();
            let mut validation = Validation::new(Algorithm::ES256);
            validation.validate_aud = false;
            validation.validate_exp = false;
            validation.set_required_spec_claims(&["sub"]);
            jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &validation).unwrap();
        }
        // The same id after a restart.
        let again = TokenIssuer::load_or_create(dir.path()).unwrap().key_set();
        assert_eq!(again["keys"][0]["kid"], key["kid"]);
    }

    fn issuer_claims(token: &str) -> serde_json::Value {
        use base64::Engine;
        let payload = token.split('.').nth(1).unwrap();
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap();
        serde_json::from_slice(&payload).unwrap()
    }
}

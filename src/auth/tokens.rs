//! Service account tokens, as Kubernetes' TokenRequest issues them: JWTs signed (ES256) with
//! the key in `DATA_DIR/pki/sa.key` (made at the first start, kept across restarts, as
//! kube-apiserver's `--service-account-signing-key-file`), naming the account
//! (`system:serviceaccount:NS:NAME`, its uid), the issuer and audiences, and when they expire.
//! A token is good while its signature, issuer, audience and time hold and its account still
//! exists with the uid it names: deleting the account revokes its tokens.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::{AuthConfigError, UserInfo};

/// The issuer, and the audience tokens are for unless they ask for others.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Signs and checks tokens.
pub struct TokenIssuer {
    encoding: EncodingKey,
    decoding: DecodingKey,
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
    nbf: i64,
    iss: String,
    jti: String,
    sub: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
}

#[derive(Debug, Serialize, Deserialize)]
struct KubernetesClaims {
    namespace: String,
    serviceaccount: AccountRef,
}

#[derive(Debug, Serialize, Deserialize)]
struct AccountRef {
    name: String,
    uid: String,
}

/// The account a good token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenAccount {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub audiences: Vec<String>,
}

impl TokenAccount {
    /// The user the account is.
    pub fn user(&self) -> UserInfo {
        UserInfo::service_account(&self.namespace, &self.name, &self.uid)
    }
}

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
        Ok(TokenIssuer { encoding, decoding })
    }

    /// A token for the account, good for `seconds` from now for `audiences` (the issuer when
    /// empty); with when it expires (Unix seconds).
    pub fn issue(&self, account: &TokenAccount, seconds: i64) -> Result<(String, i64), String> {
        let now = chrono::Utc::now().timestamp();
        let audiences = if account.audiences.is_empty() {
            vec![ISSUER.to_string()]
        } else {
            account.audiences.clone()
        };
        let claims = Claims {
            aud: audiences,
            exp: now + seconds,
            iat: now,
            nbf: now,
            iss: ISSUER.into(),
            jti: uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string(),
            sub: account.user().name,
            kubernetes: KubernetesClaims {
                namespace: account.namespace.clone(),
                serviceaccount: AccountRef { name: account.name.clone(), uid: account.uid.clone() },
            },
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &self.encoding)
            .map_err(|e| e.to_string())?;
        Ok((token, now + seconds))
    }

    /// The account a token names, if its signature, issuer, time and audience hold (the
    /// account's existence is the caller's to check). `audiences`: those the token must be
    /// for one of (the issuer when empty).
    pub fn verify(&self, token: &str, audiences: &[String]) -> Option<TokenAccount> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[ISSUER]);
        let wanted: Vec<&str> = if audiences.is_empty() {
            vec![ISSUER]
        } else {
            audiences.iter().map(String::as_str).collect()
        };
        validation.set_audience(&wanted);
        validation.leeway = 0;
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation).ok()?;
        let claims = data.claims;
        Some(TokenAccount {
            namespace: claims.kubernetes.namespace,
            name: claims.kubernetes.serviceaccount.name,
            uid: claims.kubernetes.serviceaccount.uid,
            audiences: claims.aud,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_their_account_until_they_expire() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = TokenIssuer::load_or_create(dir.path()).unwrap();
        let account = TokenAccount {
            namespace: "team".into(),
            name: "ci".into(),
            uid: "u-1".into(),
            audiences: vec![],
        };
        let (token, _) = issuer.issue(&account, 600).unwrap();
        let verified = issuer.verify(&token, &[]).unwrap();
        assert_eq!((verified.name.as_str(), verified.uid.as_str()), ("ci", "u-1"));
        assert_eq!(verified.user().name, "system:serviceaccount:team:ci");
        assert!(verified.user().groups.contains(&"system:serviceaccounts:team".to_string()));
        // The same key after a restart; another key refuses it.
        assert!(TokenIssuer::load_or_create(dir.path()).unwrap().verify(&token, &[]).is_some());
        let other = tempfile::tempdir().unwrap();
        assert!(TokenIssuer::load_or_create(other.path()).unwrap().verify(&token, &[]).is_none());
        // Expired, or for another audience: refused.
        let (old, _) = issuer.issue(&account, -10).unwrap();
        assert!(issuer.verify(&old, &[]).is_none());
        let vault = TokenAccount { audiences: vec!["vault".into()], ..account };
        let (for_vault, _) = issuer.issue(&vault, 600).unwrap();
        assert!(issuer.verify(&for_vault, &[]).is_none());
        assert!(issuer.verify(&for_vault, &["vault".to_string()]).is_some());
        assert!(issuer.verify("not.a.token", &[]).is_none());
    }
}

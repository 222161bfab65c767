//! The secure port's TLS (rustls, ring): the certificate and key of `--tls-cert-file` and
//! `--tls-private-key-file`, or, without them, a self-signed pair kept in
//! `DATA_DIR/pki/apiserver.{crt,key}` (made at the first start, as kube-apiserver's
//! `--cert-dir` does; valid for localhost, 127.0.0.1, this host's name and the `kubernetes`
//! service names). With `--client-ca-file`, clients may present a certificate signed by that
//! CA (it names their user); clients without one still connect and authenticate otherwise.
//! As kube-apiserver asks for them (Go's `RequestClientCert`), any certificate is taken in the
//! handshake (the client proves it holds its key) and judged afterwards against the CA, so
//! one the CA does not vouch for is a 401 (unless a bearer token names a user), not a failed
//! handshake; a version 1 certificate (what `openssl x509 -req` makes without extensions),
//! which Go verifies, is verified here too (over TLS 1.3: TLS 1.2's signature check goes
//! through webpki, which does not parse them).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, SubjectPublicKeyInfoDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::AuthConfigError;

/// Where the certificates come from.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub client_ca: Option<PathBuf>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, AuthConfigError> {
    let pem = std::fs::read(path).map_err(|e| AuthConfigError::file(path, e))?;
    let certificates: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| AuthConfigError::file(path, e))?;
    if certificates.is_empty() {
        return Err(AuthConfigError::file(path, "no PEM certificate in it"));
    }
    Ok(certificates)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, AuthConfigError> {
    let pem = std::fs::read(path).map_err(|e| AuthConfigError::file(path, e))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| AuthConfigError::file(path, e))?
        .ok_or_else(|| AuthConfigError::file(path, "no PEM private key in it"))
}

/// The self-signed pair under `data_dir/pki`, made if missing, for the local names, the
/// `kubernetes` Service's names and `addresses` (the Service's cluster IP).
fn self_signed(
    data_dir: &Path,
    addresses: &[std::net::IpAddr],
) -> Result<(PathBuf, PathBuf), AuthConfigError> {
    let dir = data_dir.join("pki");
    let (cert, key) = (dir.join("apiserver.crt"), dir.join("apiserver.key"));
    if cert.is_file() && key.is_file() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(&dir).map_err(|e| AuthConfigError::file(&dir, e))?;
    let mut names: Vec<String> = ["localhost", "127.0.0.1", "kubernetes", "kubernetes.default"]
        .into_iter()
        .chain(["kubernetes.default.svc", "kubernetes.default.svc.cluster.local"])
        .map(String::from)
        .collect();
    let host = kplane_actors::machine::host_name().to_lowercase();
    if host != "localhost" {
        names.push(host);
    }
    names.extend(addresses.iter().map(|a| a.to_string()));
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| AuthConfigError::file(&cert, format!("generating a certificate: {e}")))?;
    super::write_new_file(&key, &generated.key_pair.serialize_pem(), 0o600)?;
    super::write_new_file(&cert, &generated.cert.pem(), 0o644)?;
    tracing::info!(cert = %cert.display(), "generated a self-signed certificate for the secure port");
    Ok((cert, key))
}

/// The TLS configuration of the secure port, and the certificate clients verify it with (the
/// last of its chain, in PEM: the self-signed one itself); a self-signed certificate made here
/// also names `addresses`. With `clients` (the client CA), clients are asked for certificates.
pub fn server_config(
    files: &TlsFiles,
    data_dir: &Path,
    addresses: &[std::net::IpAddr],
    clients: Option<&Arc<ClientCertificates>>,
) -> Result<(rustls::ServerConfig, String), AuthConfigError> {
    let (cert, key) = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        (None, None) => self_signed(data_dir, addresses)?,
        (Some(cert), None) | (None, Some(cert)) => {
            return Err(AuthConfigError::file(
                cert,
                "server.tls_cert_file and server.tls_private_key_file go together",
            ))
        }
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| AuthConfigError::file(&cert, e))?;
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(clients) => {
            builder.with_client_cert_verifier(Arc::new(RequestClientCert(clients.clone())))
        }
    };
    let mut config = builder
        .with_single_cert(read_certificates(&cert)?, read_key(&key)?)
        .map_err(|e| AuthConfigError::file(&key, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let pem = std::fs::read_to_string(&cert).map_err(|e| AuthConfigError::file(&cert, e))?;
    let root = last_certificate(&pem)
        .ok_or_else(|| AuthConfigError::file(&cert, "no PEM certificate in it"))?;
    Ok((config, root))
}

/// The client CA, and how it judges the certificates clients present.
#[derive(Debug)]
pub struct ClientCertificates {
    webpki: Arc<dyn ClientCertVerifier>,
    roots: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertificates {
    /// The CA certificates of `ca` (`--client-ca-file`).
    pub fn load(ca: &Path) -> Result<Arc<Self>, AuthConfigError> {
        let roots_der = read_certificates(ca)?;
        let mut roots = rustls::RootCertStore::empty();
        for certificate in &roots_der {
            roots.add(certificate.clone()).map_err(|e| AuthConfigError::file(ca, e))?;
        }
        let webpki = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| AuthConfigError::file(ca, e))?;
        let algorithms = provider().signature_verification_algorithms;
        Ok(Arc::new(Self { webpki, roots: roots_der, algorithms }))
    }

    /// Whether the CA vouches for `chain` (the leaf first), now: a chain webpki verifies for
    /// client authentication, or a version 1 leaf signed by one of the CA's certificates and
    /// within its validity (webpki takes only version 3 certificates; Go takes both).
    pub fn vouches_for(&self, chain: &[CertificateDer<'_>]) -> bool {
        let Some((leaf, intermediates)) = chain.split_first() else { return false };
        if self.webpki.verify_client_cert(leaf, intermediates, UnixTime::now()).is_ok() {
            return true;
        }
        let Ok((_, parsed)) = x509_parser::parse_x509_certificate(leaf) else { return false };
        if parsed.version() != x509_parser::x509::X509Version::V1 || !parsed.validity().is_valid() {
            return false;
        }
        self.roots.iter().any(|root| {
            x509_parser::parse_x509_certificate(root).is_ok_and(|(_, ca)| {
                ca.subject() == parsed.issuer()
                    && parsed.verify_signature(Some(ca.public_key())).is_ok()
            })
        })
    }
}

/// Asks for a client certificate and takes any whose key the client proves it holds: the
/// certificate is judged after the handshake ([`ClientCertificates::vouches_for`]).
#[derive(Debug)]
struct RequestClientCert(Arc<ClientCertificates>);

impl ClientCertVerifier for RequestClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.webpki.verify_tls12_signature(message, cert, dss)
    }

    /// By the certificate's key; a version 1 certificate (which webpki does not parse) by its
    /// key read with x509-parser.
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let verified = self.0.webpki.verify_tls13_signature(message, cert, dss);
        if verified.is_ok() {
            return verified;
        }
        let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert) else { return verified };
        let key = SubjectPublicKeyInfoDer::from(parsed.public_key().raw);
        rustls::crypto::verify_tls13_signature_with_raw_key(message, &key, dss, &self.0.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.webpki.supported_verify_schemes()
    }
}

/// The last PEM certificate of `pem`, with its final newline.
fn last_certificate(pem: &str) -> Option<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let start = pem.rfind(BEGIN)?;
    let end = start + pem[start..].find(END)? + END.len();
    Some(format!("{}\n", &pem[start..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_certificate_of_a_chain_is_the_one_clients_verify_with() {
        let one = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n";
        let two = "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----";
        assert_eq!(last_certificate(&format!("{one}{two}\n")), Some(format!("{two}\n")));
        assert_eq!(last_certificate(one), Some(one.to_string()));
        assert_eq!(last_certificate("-----BEGIN CERTIFICATE-----\nCCC"), None);
        assert_eq!(last_certificate(""), None);
    }
}

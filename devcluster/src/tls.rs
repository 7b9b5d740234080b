//! HTTPS for the dev cluster (`--tls`): a CA of its own and a serving certificate for the
//! loopback names, the listen address and the names pods use for the API server
//! (`kubernetes.default.svc`, 10.96.0.1). With a data dir both are kept there, so a kubeconfig
//! (which carries the CA) stays valid across restarts; the serving certificate is issued again
//! when the names change.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Errors of making or reading the certificates.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Generating a key or a certificate failed.
    #[error("cannot generate the certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// The stored certificates could not be read or written.
    #[error("cannot keep the certificates in {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificates could not be used for serving.
    #[error("cannot serve with the certificates: {0}")]
    Serve(String),
}

/// The CA and the serving certificate, PEM-encoded.
#[derive(Clone)]
pub struct Tls {
    /// The CA certificate (the kubeconfig's `certificate-authority-data`).
    pub ca_pem: String,
    ca_key_pem: String,
    cert_pem: String,
    key_pem: String,
    names: Vec<String>,
}

/// The names the serving certificate covers for a server listening on `addr`.
pub fn serving_names(addr: SocketAddr) -> Vec<String> {
    let mut names: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "::1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "10.96.0.1",
    ]
    .map(String::from)
    .to_vec();
    let ip = addr.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        names.push(ip.to_string());
    }
    names
}

const CA_NAME: &str = "bosun-devcluster-ca";

fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    Ok(params)
}

/// A serving certificate for `names`, signed by the CA key.
fn issue(ca_key: &KeyPair, names: &[String]) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let issuer = Issuer::new(ca_params()?, ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl Tls {
    /// A new CA and a serving certificate for `names`.
    pub fn generate(names: &[String]) -> Result<Tls, Error> {
        let ca_key = KeyPair::generate()?;
        let ca = ca_params()?.self_signed(&ca_key)?;
        let (cert_pem, key_pem) = issue(&ca_key, names)?;
        Ok(Tls { ca_pem: ca.pem(), ca_key_pem: ca_key.serialize_pem(), cert_pem, key_pem, names: names.to_vec() })
    }

    /// The certificates kept in `dir` (made there on first use), or new ones without a dir.
    pub fn load_or_generate(dir: Option<&Path>, names: &[String]) -> Result<Tls, Error> {
        let Some(dir) = dir else { return Tls::generate(names) };
        let file = |name: &str| dir.join(name);
        let read = |name: &str| std::fs::read_to_string(file(name)).ok();
        let tls = match (read("ca.crt"), read("ca.key")) {
            (Some(ca_pem), Some(ca_key_pem)) => {
                let ca_key = KeyPair::from_pem(&ca_key_pem)?;
                let kept = (read("tls.crt"), read("tls.key"), read("tls.names"));
                match kept {
                    (Some(cert_pem), Some(key_pem), Some(kept_names)) if kept_names.lines().eq(names.iter().map(String::as_str)) => {
                        return Ok(Tls { ca_pem, ca_key_pem, cert_pem, key_pem, names: names.to_vec() });
                    }
                    _ => {
                        let (cert_pem, key_pem) = issue(&ca_key, names)?;
                        Tls { ca_pem, ca_key_pem, cert_pem, key_pem, names: names.to_vec() }
                    }
                }
            }
            _ => Tls::generate(names)?,
        };
        let io = |name: &str| {
            let path = file(name);
            move |source| Error::Io { path: path.display().to_string(), source }
        };
        crate::persist::create_private_dir(dir).map_err(io(""))?;
        crate::persist::write_private(&file("ca.crt"), tls.ca_pem.as_bytes()).map_err(io("ca.crt"))?;
        crate::persist::write_private(&file("ca.key"), tls.ca_key_pem.as_bytes()).map_err(io("ca.key"))?;
        crate::persist::write_private(&file("tls.crt"), tls.cert_pem.as_bytes()).map_err(io("tls.crt"))?;
        crate::persist::write_private(&file("tls.key"), tls.key_pem.as_bytes()).map_err(io("tls.key"))?;
        crate::persist::write_private(&file("tls.names"), tls.names.join("\n").as_bytes()).map_err(io("tls.names"))?;
        Ok(tls)
    }

    /// The CA certificate in DER (for a `kube::Config`'s `root_cert`).
    pub fn ca_der(&self) -> Vec<u8> {
        CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).map(|c| c.to_vec()).unwrap_or_default()
    }

    /// A TLS acceptor serving the certificate, offering HTTP/2 and HTTP/1.1 (as kubectl
    /// and client-go negotiate).
    pub fn acceptor(&self) -> Result<TlsAcceptor, Error> {
        let bad = |e: &dyn std::fmt::Display| Error::Serve(e.to_string());
        let chain = vec![CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).map_err(|e| bad(&e))?];
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| bad(&e))?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad(&e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_certificate_names_loopback_the_in_cluster_names_and_a_specific_listen_address() {
        let cases: [(&str, &[&str], &[&str]); 3] = [
            ("127.0.0.1:6443", &["localhost", "127.0.0.1", "::1", "kubernetes.default.svc", "10.96.0.1"], &["0.0.0.0"]),
            ("0.0.0.0:6443", &["localhost", "127.0.0.1"], &["0.0.0.0"]),
            ("192.168.5.7:6443", &["192.168.5.7", "127.0.0.1"], &[]),
        ];
        for (addr, named, not_named) in cases {
            let names = serving_names(addr.parse().unwrap());
            for n in named {
                assert!(names.contains(&n.to_string()), "{addr}: {n} in {names:?}");
            }
            for n in not_named {
                assert!(!names.contains(&n.to_string()), "{addr}: {n} not in {names:?}");
            }
        }
    }

    #[test]
    fn kept_certificates_are_reused_and_the_serving_one_is_issued_again_for_new_names() {
        let dir = tempfile::tempdir().unwrap();
        let names = serving_names("127.0.0.1:1".parse().unwrap());
        let first = Tls::load_or_generate(Some(dir.path()), &names).unwrap();
        let again = Tls::load_or_generate(Some(dir.path()), &names).unwrap();
        assert_eq!((&first.ca_pem, &first.cert_pem), (&again.ca_pem, &again.cert_pem));
        let other = serving_names("10.1.2.3:1".parse().unwrap());
        let moved = Tls::load_or_generate(Some(dir.path()), &other).unwrap();
        assert_eq!(moved.ca_pem, first.ca_pem, "the CA stays, so kubeconfigs stay valid");
        assert_ne!(moved.cert_pem, first.cert_pem);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("ca.key")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(moved.acceptor().is_ok());
    }
}

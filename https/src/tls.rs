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
const SERVER_NAME: &str = "kube-apiserver";

fn ca_params(ca_name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, ca_name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    Ok(params)
}

/// A serving certificate of `server_name` for `names`, signed by the key of CA `ca_name`.
fn issue(ca_key: &KeyPair, ca_name: &str, server_name: &str, names: &[String]) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(DnType::CommonName, server_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let issuer = Issuer::new(ca_params(ca_name)?, ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl Tls {
    /// A new CA and a serving certificate of the API server for `names`.
    pub fn generate(names: &[String]) -> Result<Tls, Error> {
        Tls::generate_for(CA_NAME, SERVER_NAME, names)
    }

    /// A new CA (common name `ca_name`) and a serving certificate of `server_name` for
    /// `names` (DNS names and IP addresses), as another server (an admission webhook) needs.
    pub fn generate_for(ca_name: &str, server_name: &str, names: &[String]) -> Result<Tls, Error> {
        let ca_key = KeyPair::generate()?;
        let ca = ca_params(ca_name)?.self_signed(&ca_key)?;
        let (cert_pem, key_pem) = issue(&ca_key, ca_name, server_name, names)?;
        Ok(Tls { ca_pem: ca.pem(), ca_key_pem: ca_key.serialize_pem(), cert_pem, key_pem, names: names.to_vec() })
    }

    /// The serving certificate, PEM-encoded.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The serving certificate's private key, PEM-encoded.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
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
                        let (cert_pem, key_pem) = issue(&ca_key, CA_NAME, SERVER_NAME, names)?;
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
        crate::private::create_private_dir(dir).map_err(io(""))?;
        crate::private::write_private(&file("ca.crt"), tls.ca_pem.as_bytes()).map_err(io("ca.crt"))?;
        crate::private::write_private(&file("ca.key"), tls.ca_key_pem.as_bytes()).map_err(io("ca.key"))?;
        crate::private::write_private(&file("tls.crt"), tls.cert_pem.as_bytes()).map_err(io("tls.crt"))?;
        crate::private::write_private(&file("tls.key"), tls.key_pem.as_bytes()).map_err(io("tls.key"))?;
        crate::private::write_private(&file("tls.names"), tls.names.join("\n").as_bytes()).map_err(io("tls.names"))?;
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

/// Whether the serving certificate `cert_pem` is valid for `name` (a DNS name or an IP
/// address) under the CA `ca_pem`, as a TLS client checks it; why not, otherwise.
pub fn verify(ca_pem: &str, cert_pem: &str, name: &str) -> Result<(), String> {
    use tokio_rustls::rustls::client::WebPkiServerVerifier;
    use tokio_rustls::rustls::client::danger::ServerCertVerifier as _;
    use tokio_rustls::rustls::pki_types::{ServerName, UnixTime};
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.map_err(|e| format!("the CA is not PEM: {e}"))?).map_err(|e| format!("the CA is not a certificate: {e}"))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().map_err(|e| e.to_string())?;
    let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| format!("the certificate is not PEM: {e}"))?;
    let server = ServerName::try_from(name.to_string()).map_err(|e| format!("{name:?} is not a server name: {e}"))?;
    verifier.verify_server_cert(&cert, &[], &server, &[], UnixTime::now()).map(|_| ()).map_err(|e| e.to_string())
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
    fn the_serving_certificate_validates_for_its_names_only_and_under_its_own_ca_only() {
        let names: Vec<String> = ["bosun.ops.svc", "localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
        let tls = Tls::generate_for("test-ca", "test-server", &names).unwrap();
        let other = Tls::generate_for("test-ca", "test-server", &names).unwrap();
        for name in &names {
            assert_eq!(verify(&tls.ca_pem, tls.cert_pem(), name), Ok(()), "{name}");
        }
        for name in ["bosun.other.svc", "10.0.0.1", "bosun"] {
            assert!(verify(&tls.ca_pem, tls.cert_pem(), name).is_err(), "{name} is not named");
        }
        assert!(verify(&other.ca_pem, tls.cert_pem(), "localhost").is_err(), "another CA of the same name did not sign it");
        assert!(verify("garbage", tls.cert_pem(), "localhost").is_err());
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

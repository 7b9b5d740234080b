//! The HTTPS server the admission endpoint is served on (Kopf's `WebhookServer`), and its
//! certificate: from files (`--admission-cert`/`--admission-key`, read again when they
//! change, as cert-manager rotates them in a mounted Secret) or self-signed: a CA of the
//! controller's own and a serving certificate for the names the API server reaches it by,
//! the Service's DNS names (`--admission-service NS/NAME`) or, in development, the loopback
//! names. The CA (or, for files, the `--admission-ca` file, else the certificate file's own
//! chain) is what the webhook configurations carry as `caBundle`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

pub use bosun_https::tls::{Error as TlsError, Tls};

use crate::logs::Logger;

/// How often certificate files are read again to see whether they changed.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// Where the serving certificate comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Certificate {
    /// Made at start: a new CA and a serving certificate for the serving names.
    #[default]
    SelfSigned,
    /// PEM files, read again when they change.
    Files {
        /// The certificate chain (`tls.crt`).
        cert: PathBuf,
        /// Its private key (`tls.key`).
        key: PathBuf,
        /// The CA to put in `caBundle` (`ca.crt`); without it, the certificate file itself.
        ca: Option<PathBuf>,
    },
}

/// Why the webhook server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address is taken or invalid.
    #[error("cannot listen for admission webhooks on {addr}: {error}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// The certificate could not be made or read.
    #[error("the admission webhook certificate: {0}")]
    Certificate(String),
}

/// The names a serving certificate covers: the Service's DNS names, in every form a client
/// in the cluster may use, and the loopback names (the dev cluster, a controller on a laptop).
pub fn serving_names(service: Option<(&str, &str)>) -> Vec<String> {
    let mut names = Vec::new();
    if let Some((namespace, name)) = service {
        names.extend([
            name.to_string(),
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]);
    }
    names.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    names
}

/// A new CA and a serving certificate for `serving_names(service)` and `more` names (the
/// host of `--admission-url`).
pub fn self_signed(service: Option<(&str, &str)>, more: &[String]) -> Result<Tls, TlsError> {
    let mut names = serving_names(service);
    names.extend(more.iter().filter(|n| !names.contains(n)).cloned().collect::<Vec<_>>());
    Tls::generate_for("bosun-admission-ca", "bosun-admission", &names)
}

/// A certificate and its key, as served.
fn certified(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_pem).collect::<Result<_, _>>().map_err(|e| format!("the certificate is not PEM: {e}"))?;
    if chain.is_empty() {
        return Err("the certificate file holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("the key is not a PEM private key: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider.key_provider.load_private_key(key).map_err(|e| format!("the key cannot sign: {e}"))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| format!("the key does not belong to the certificate: {e}"))?;
    Ok(certified)
}

/// The certificate served now; swapped when its files change.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().clone())
    }
}

/// The bytes of the certificate, key and CA files.
type Read = (Vec<u8>, Vec<u8>, Vec<u8>);

/// The certificate, key and CA files' bytes (the certificate's again for the CA without a
/// CA file).
fn read(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Read, String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let cert = read(cert)?;
    let key = read(key)?;
    let ca = match ca {
        Some(ca) => read(ca)?,
        None => cert.clone(),
    };
    Ok((cert, key, ca))
}

/// The certificate to serve and the `caBundle` of what was read, or why they are not valid.
fn parse(read: &Read) -> Result<(CertifiedKey, String), String> {
    let certified = certified(&read.0, &read.1)?;
    let ca = String::from_utf8(read.2.clone()).map_err(|_| "the CA is not PEM text".to_string())?;
    Ok((certified, ca))
}

/// Certificate files, and what was read from them last.
pub struct Files {
    cert: PathBuf,
    key: PathBuf,
    ca: Option<PathBuf>,
    /// The bytes last read, to see a change.
    last: Read,
    current: Arc<Current>,
    ca_bundle: watch::Sender<String>,
}

impl Files {
    /// Reads the files again; serves the new certificate if they changed and are valid.
    /// `Ok(true)` when it changed; an error (the old certificate stays) when they are not
    /// valid now.
    pub fn check(&mut self) -> Result<bool, String> {
        let read = read(&self.cert, &self.key, self.ca.as_deref())?;
        if read == self.last {
            return Ok(false);
        }
        let (certified, ca) = parse(&read)?;
        *self.current.0.write() = Arc::new(certified);
        self.ca_bundle.send_replace(ca);
        self.last = read;
        Ok(true)
    }

    /// Checks the files every [`RELOAD_EVERY`] until `stop`, logging what happens.
    pub async fn watch(mut self, log: Logger, mut stop: watch::Receiver<bool>) {
        let mut failing = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD_EVERY) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            match self.check() {
                Ok(true) => {
                    failing = None;
                    log.info(None, &format!("Reloaded the admission webhook certificate from {}.", self.cert.display()));
                }
                Ok(false) => failing = None,
                // Said once per different error, not every 10 s.
                Err(e) if failing.as_ref() != Some(&e) => {
                    log.error(None, &format!("Cannot reload the admission webhook certificate: {e}; the previous one is served."));
                    failing = Some(e);
                }
                Err(_) => {}
            }
        }
    }
}

/// A TLS server configuration serving `current`, offering HTTP/2 and HTTP/1.1.
fn acceptor(current: Arc<Current>) -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(current);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// The certificate to serve: its acceptor, the `caBundle` (changing when files change), and
/// for files the watcher that reloads them.
pub fn load(certificate: &Certificate, service: Option<(&str, &str)>, more_names: &[String]) -> Result<Loaded, Error> {
    match certificate {
        Certificate::SelfSigned => {
            let tls = self_signed(service, more_names).map_err(|e| Error::Certificate(e.to_string()))?;
            let certified = certified(tls.cert_pem().as_bytes(), tls.key_pem().as_bytes()).map_err(Error::Certificate)?;
            let current = Arc::new(Current(RwLock::new(Arc::new(certified))));
            let (ca_bundle, _) = watch::channel(tls.ca_pem.clone());
            Ok(Loaded { acceptor: acceptor(current), ca_bundle, files: None })
        }
        Certificate::Files { cert, key, ca } => {
            let first = |e: String| Error::Certificate(format!("{}: {e}", cert.display()));
            let last = read(cert, key, ca.as_deref()).map_err(first)?;
            let (certified, bundle) = parse(&last).map_err(first)?;
            let current = Arc::new(Current(RwLock::new(Arc::new(certified))));
            let (ca_bundle, _) = watch::channel(bundle);
            let files = Files {
                cert: cert.clone(),
                key: key.clone(),
                ca: ca.clone(),
                last,
                current: current.clone(),
                ca_bundle: ca_bundle.clone(),
            };
            Ok(Loaded { acceptor: acceptor(current), ca_bundle, files: Some(files) })
        }
    }
}

/// A certificate ready to serve.
pub struct Loaded {
    /// The TLS acceptor.
    pub acceptor: TlsAcceptor,
    /// The PEM for `caBundle`; it changes when the files do.
    pub ca_bundle: watch::Sender<String>,
    /// The files to watch, if the certificate comes from files.
    pub files: Option<Files>,
}

/// Binds `listen`, and serves `app` there over TLS with `loaded` until `stop`. The bound
/// address (port 0 picks a free one).
pub async fn serve(listen: &str, app: axum::Router, loaded: Loaded, log: Logger, stop: watch::Receiver<bool>) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|error| Error::Listen { addr: listen.into(), error })?;
    let local = listener.local_addr().map_err(|error| Error::Listen { addr: listen.into(), error })?;
    if let Some(files) = loaded.files {
        tokio::spawn(files.watch(log, stop.clone()));
    }
    let limits = bosun_https::serve::Limits { header_read_timeout: Duration::from_secs(10), max_connections: 256 };
    tokio::spawn(bosun_https::serve::serve(listener, app, Some(loaded.acceptor), limits, stop));
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_https::tls::verify;

    #[test]
    fn the_generated_chain_validates_for_the_names_given_and_no_others() {
        /// The Service, more names, the names the chain is valid for, names it is not.
        type Case<'a> = (Option<(&'a str, &'a str)>, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: [Case; 3] = [
            (
                Some(("ops", "bosun")),
                &[],
                &["bosun", "bosun.ops", "bosun.ops.svc", "bosun.ops.svc.cluster.local", "localhost", "127.0.0.1", "::1"],
                &["bosun.other.svc", "other.ops.svc", "10.96.0.1"],
            ),
            (None, &[], &["localhost", "127.0.0.1", "::1"], &["bosun.ops.svc", "example.com"]),
            (None, &["host.docker.internal", "localhost"], &["host.docker.internal", "localhost"], &["example.com"]),
        ];
        for (service, more, valid, invalid) in cases {
            let more: Vec<String> = more.iter().map(|s| s.to_string()).collect();
            let tls = self_signed(service, &more).unwrap();
            for name in valid {
                assert_eq!(verify(&tls.ca_pem, tls.cert_pem(), name), Ok(()), "{service:?}: {name}");
            }
            for name in invalid {
                assert!(verify(&tls.ca_pem, tls.cert_pem(), name).is_err(), "{service:?}: {name} is not named");
            }
        }
    }

    fn files_in(dir: &std::path::Path, tls: &Tls) {
        std::fs::write(dir.join("tls.crt"), tls.cert_pem()).unwrap();
        std::fs::write(dir.join("tls.key"), tls.key_pem()).unwrap();
        std::fs::write(dir.join("ca.crt"), &tls.ca_pem).unwrap();
    }

    fn served(loaded: &Arc<Current>) -> Vec<u8> {
        loaded.0.read().cert[0].to_vec()
    }

    #[test]
    fn certificate_files_are_served_and_swapped_only_for_valid_changes() {
        let dir = tempfile::tempdir().unwrap();
        let first = self_signed(None, &[]).unwrap();
        files_in(dir.path(), &first);
        let certificate =
            Certificate::Files { cert: dir.path().join("tls.crt"), key: dir.path().join("tls.key"), ca: Some(dir.path().join("ca.crt")) };
        let loaded = load(&certificate, None, &[]).unwrap();
        let mut files = loaded.files.unwrap();
        let der = |t: &Tls| CertificateDer::from_pem_slice(t.cert_pem().as_bytes()).unwrap().to_vec();
        assert_eq!(served(&files.current), der(&first));
        assert_eq!(*loaded.ca_bundle.borrow(), first.ca_pem);
        assert_eq!(files.check(), Ok(false), "nothing changed");

        // Rotated: served from the next check, and the CA bundle follows.
        let second = self_signed(None, &[]).unwrap();
        files_in(dir.path(), &second);
        assert_eq!(files.check(), Ok(true));
        assert_eq!(served(&files.current), der(&second));
        assert_eq!(*loaded.ca_bundle.borrow(), second.ca_pem);

        // Half-written (a key of another certificate), garbage, gone: an error, the last
        // good certificate stays.
        let third = self_signed(None, &[]).unwrap();
        std::fs::write(dir.path().join("tls.key"), third.key_pem()).unwrap();
        assert!(files.check().unwrap_err().contains("does not belong"), "a mismatched key");
        std::fs::write(dir.path().join("tls.crt"), "garbage").unwrap();
        assert!(files.check().unwrap_err().contains("no certificate"), "garbage");
        std::fs::remove_file(dir.path().join("tls.crt")).unwrap();
        assert!(files.check().unwrap_err().contains("cannot read"), "gone");
        assert_eq!(served(&files.current), der(&second));
        assert_eq!(*loaded.ca_bundle.borrow(), second.ca_pem);
    }

    #[test]
    fn bad_certificate_files_at_start_are_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Certificate::Files { cert: dir.path().join("tls.crt"), key: dir.path().join("tls.key"), ca: None };
        let Err(e) = load(&missing, None, &[]) else { panic!("loaded a missing certificate") };
        assert!(e.to_string().contains("cannot read") && e.to_string().contains("tls.crt"), "{e}");
        std::fs::write(dir.path().join("tls.crt"), "not pem").unwrap();
        std::fs::write(dir.path().join("tls.key"), "not pem").unwrap();
        let Err(e) = load(&missing, None, &[]) else { panic!("loaded garbage") };
        assert!(e.to_string().contains("no certificate"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_watcher_serves_rotated_files_within_one_period() {
        let dir = tempfile::tempdir().unwrap();
        files_in(dir.path(), &self_signed(None, &[]).unwrap());
        let certificate = Certificate::Files { cert: dir.path().join("tls.crt"), key: dir.path().join("tls.key"), ca: None };
        let loaded = load(&certificate, None, &[]).unwrap();
        let files = loaded.files.unwrap();
        let current = files.current.clone();
        let mut bundle = loaded.ca_bundle.subscribe();
        let (stop_tx, stop) = watch::channel(false);
        let watcher = tokio::spawn(files.watch(Logger::new(None), stop));
        let second = self_signed(None, &[]).unwrap();
        files_in(dir.path(), &second);
        let before = tokio::time::Instant::now();
        bundle.changed().await.unwrap();
        assert!(before.elapsed() <= RELOAD_EVERY, "reloaded within one period: {:?}", before.elapsed());
        assert_eq!(*bundle.borrow(), second.cert_pem(), "without a CA file, the certificate is the bundle");
        assert_eq!(current.0.read().cert[0].to_vec(), CertificateDer::from_pem_slice(second.cert_pem().as_bytes()).unwrap().to_vec());
        stop_tx.send_replace(true);
        watcher.await.unwrap();
    }
}

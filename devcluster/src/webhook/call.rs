//! The one place the dev cluster talks to webhooks: an HTTPS POST of a review to a
//! webhook's `clientConfig.url`, its certificate checked against the webhook's `caBundle`,
//! within its timeout. Failures are worded as Go's HTTP client words them (`Post "URL": dial
//! tcp ...: connect: connection refused`), since that is what users of a real server see.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

/// A webhook's answer: the HTTP status and body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status code.
    pub code: u16,
    /// The body.
    pub body: Bytes,
}

/// `?timeout=` as the real server appends it: the timeout as a Go duration.
pub fn with_timeout(url: &str, timeout: Duration) -> String {
    let secs = timeout.as_secs();
    let text = if secs < 60 { format!("{secs}s") } else { format!("{}m{}s", secs / 60, secs % 60) };
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}timeout={text}")
}

/// POST `body` to `url` (which carries `?timeout=`), trusting the CAs of `ca_bundle` (PEM;
/// none trusts nothing, the dev cluster knowing no system roots), within `timeout`. The error
/// is the text after `failed to call webhook: `.
pub async fn post(url: &str, ca_bundle: Option<&[u8]>, body: Vec<u8>, timeout: Duration) -> Result<Reply, String> {
    let go_error = |why: String| format!("Post {url:?}: {why}");
    match tokio::time::timeout(timeout, exchange(url, ca_bundle, body)).await {
        Err(_) => Err(go_error("context deadline exceeded".into())),
        Ok(Err(why)) => Err(go_error(why)),
        Ok(Ok(reply)) => Ok(reply),
    }
}

async fn exchange(url: &str, ca_bundle: Option<&[u8]>, body: Vec<u8>) -> Result<Reply, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("unsupported protocol scheme {:?}", uri.scheme_str().unwrap_or("")));
    }
    let host = uri.host().ok_or("no Host in request URL")?.trim_start_matches('[').trim_end_matches(']').to_string();
    let port = uri.port_u16().unwrap_or(443);
    let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let tcp = tokio::net::TcpStream::connect(&addr).await.map_err(|e| dial_error(&addr, &e))?;
    let server = ServerName::try_from(host.clone()).map_err(|e| format!("invalid server name {host:?}: {e}"))?;
    let tls = connector(ca_bundle)?.connect(server, tcp).await.map_err(|e| tls_error(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or(&addr).to_string();
    let request = http::Request::post(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .header(http::header::USER_AGENT, "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| format!("{e}"))?;
    let code = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    driver.abort();
    Ok(Reply { code, body })
}

fn connector(ca_bundle: Option<&[u8]>) -> Result<TlsConnector, String> {
    let mut roots = RootCertStore::empty();
    for cert in ca_bundle.map(|b| CertificateDer::pem_slice_iter(b).collect::<Vec<_>>()).unwrap_or_default() {
        let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
        roots.add(cert).map_err(|e| format!("unable to load root certificates: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Go's `net.OpError` text for a failed dial.
fn dial_error(addr: &str, e: &std::io::Error) -> String {
    let why = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {addr}: {why}")
}

/// Go's `tls` / `x509` text for a failed handshake.
fn tls_error(e: &std::io::Error) -> String {
    use rustls::{CertificateError, Error};
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<Error>());
    match inner {
        Some(Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority".into()
        }
        Some(Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
            "tls: failed to verify certificate: x509: certificate is not valid for the requested name".into()
        }
        Some(Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. })) => {
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid".into()
        }
        Some(other) => format!("tls: {other}"),
        None => e.to_string(),
    }
}

/// The error client-go's REST client makes of a non-2xx answer that is not a `Status`
/// (`apierrors.NewGenericServerResponse`), worded for a POST.
pub fn status_error(code: u16, body: &[u8]) -> String {
    if let Ok(status) = serde_json::from_slice::<serde_json::Value>(body)
        && status["kind"] == "Status"
        && let Some(m) = status["message"].as_str()
    {
        return m.to_string();
    }
    let shown = String::from_utf8_lossy(body).trim().to_string();
    match code {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => "the server does not allow access to the requested resource".into(),
        404 => "the server could not find the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        409 => "the server reported a conflict".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        500.. if shown.is_empty() => "an error on the server (\"unknown\") has prevented the request from succeeding".into(),
        500.. => format!("an error on the server ({shown:?}) has prevented the request from succeeding"),
        _ => format!("the server responded with the status code {code} but did not return more information"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_parameter_is_a_go_duration() {
        assert_eq!(with_timeout("https://h/p", Duration::from_secs(10)), "https://h/p?timeout=10s");
        assert_eq!(with_timeout("https://h/p", Duration::from_secs(1)), "https://h/p?timeout=1s");
        assert_eq!(with_timeout("https://h/p?x=1", Duration::from_secs(90)), "https://h/p?x=1&timeout=1m30s");
    }

    #[test]
    fn non_2xx_answers_read_as_client_go_reads_them() {
        assert_eq!(status_error(404, b"nope"), "the server could not find the requested resource");
        assert_eq!(status_error(500, b"boom"), "an error on the server (\"boom\") has prevented the request from succeeding");
        assert_eq!(status_error(500, br#"{"kind":"Status","message":"m"}"#), "m");
        assert_eq!(status_error(302, b""), "the server responded with the status code 302 but did not return more information");
    }

    #[tokio::test]
    async fn a_refused_connection_and_a_plain_http_url_fail_with_gos_words() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let url = with_timeout(&format!("https://127.0.0.1:{port}/x"), Duration::from_secs(10));
        let e = post(&url, None, Vec::new(), Duration::from_secs(10)).await.unwrap_err();
        assert_eq!(e, format!("Post \"{url}\": dial tcp 127.0.0.1:{port}: connect: connection refused"));
        let e = post("http://127.0.0.1:1/x", None, Vec::new(), Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(e, "Post \"http://127.0.0.1:1/x\": unsupported protocol scheme \"http\"");
    }
}

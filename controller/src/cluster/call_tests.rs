//! A write sent unread is not decoded: what it answers is not read (an answer that is not
//! JSON fails `call`, not `request_unread`), while its status still decides. A forbidden
//! request says what permission it lacks, once.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::BoxError;

use super::*;

/// An API server that answers `status` with a body that is not JSON.
fn server(status: StatusCode) -> kube::Client {
    let service = tower::service_fn(move |_: Request<kube::client::Body>| async move {
        let body = Full::new(Bytes::from_static(b"not json")).map_err(|never| match never {}).boxed_unsync();
        let mut res = Response::new(body);
        *res.status_mut() = status;
        Ok::<_, BoxError>(res)
    });
    kube::Client::new(service, "default")
}

#[tokio::test]
async fn an_unread_answer_is_not_decoded_and_its_status_still_decides() {
    let ok = Cluster::new(server(StatusCode::OK));
    let read = ok.call(Method::PATCH, "/p", Some(content::MERGE), Some(b"{}".to_vec())).await;
    assert!(matches!(read, Err(Error::Decode { .. })), "{read:?}");
    ok.request_unread(Method::PATCH, "/p", Some(content::MERGE), Some(b"{}".to_vec())).await.expect("written");

    let mut refused = Cluster::new(server(StatusCode::UNPROCESSABLE_ENTITY));
    refused.retries = 0;
    let err = refused.request_unread(Method::PATCH, "/p", Some(content::MERGE), Some(b"{}".to_vec())).await.unwrap_err();
    assert_eq!(err.code(), Some(422));
}

/// Where the test's log lines go (its subscriber is set on this thread: the runtime is current-thread).
struct Lines(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_forbidden_request_says_the_missing_permission_once() {
    let logged = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = logged.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || Lines(sink.clone())).with_ansi(false).finish();
    let _on = tracing::subscriber::set_default(subscriber);
    let cluster = Cluster::new(server(StatusCode::FORBIDDEN));
    let coordination = cluster.for_coordination(Duration::from_secs(5));
    for (api, path) in [
        (&cluster, "/api/v1/namespaces/default/pods"),
        (&cluster, "/api/v1/namespaces/default/pods"),
        (&coordination, "/api/v1/namespaces/default/pods"),
        (&cluster, "/api/v1/namespaces/other/pods"),
    ] {
        let err = api.call(Method::POST, path, Some(content::JSON), Some(b"{}".to_vec())).await.unwrap_err();
        assert_eq!(err.code(), Some(403));
    }
    let text = String::from_utf8(logged.lock().clone()).unwrap();
    let said = |ns: &str| text.matches(&format!("may not create \"pods\" in the core API group in namespace \"{ns}\"")).count();
    assert_eq!((said("default"), said("other")), (1, 1), "{text}");
}

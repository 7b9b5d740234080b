//! A write sent unread is not decoded: what it answers is not read (an answer that is not
//! JSON fails `call`, not `request_unread`), while its status still decides.

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

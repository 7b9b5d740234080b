//! `--tls`: HTTPS with the dev cluster's own CA. kube-rs (with the CA from `kube_config`) and
//! kubectl (with the CA from the kubeconfig, and a bearer token it only sends over HTTPS) talk
//! to it; every namespace carries the CA in `kube-root-ca.crt`. kubectl is required as in
//! `kubectl.rs`.

#[path = "../../tests/src/tools.rs"]
mod tools;

use std::process::Command;

use bosun_devcluster::{Config, DevCluster};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};

async fn start(token: Option<&str>) -> DevCluster {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = Config { tls: true, token: token.map(String::from), ..Default::default() };
    DevCluster::start(listener, config).await.unwrap()
}

#[tokio::test]
async fn kube_rs_talks_https_and_every_namespace_carries_the_ca() {
    let dc = start(None).await;
    assert!(dc.url().starts_with("https://127.0.0.1:"), "{}", dc.url());
    let ca = dc.ca_pem().expect("a CA with TLS").to_string();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let configmaps: Api<ConfigMap> = Api::namespaced(dc.client(), "kube-system");
    let root = configmaps.get("kube-root-ca.crt").await.unwrap();
    assert_eq!(root.data.unwrap()["ca.crt"], ca);
    let namespaces: Api<Namespace> = Api::all(dc.client());
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": "fresh"}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let fresh: Api<ConfigMap> = Api::namespaced(dc.client(), "fresh");
    assert_eq!(fresh.get("kube-root-ca.crt").await.unwrap().data.unwrap()["ca.crt"], ca);

    // A client that does not trust the CA is refused at the handshake.
    let mut untrusting = dc.kube_config();
    untrusting.root_cert = None;
    let client = kube::Client::try_from(untrusting).unwrap();
    let err = Api::<ConfigMap>::namespaced(client, "default").list(&Default::default()).await.unwrap_err();
    assert!(format!("{err:?}").to_lowercase().contains("certificate"), "{err:?}");
}

#[tokio::test]
async fn without_tls_there_is_no_ca_configmap() {
    let dc = DevCluster::start_local().await.unwrap();
    assert!(dc.url().starts_with("http://"));
    let configmaps: Api<ConfigMap> = Api::namespaced(dc.client(), "default");
    assert!(configmaps.get_opt("kube-root-ca.crt").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sends_the_token_over_https_and_trusts_the_kubeconfig_ca() {
    let works = Command::new("kubectl").arg("version").arg("--client").output().is_ok_and(|o| o.status.success());
    if !tools::require_tool("`kubectl` on the PATH (Debian's kubernetes-client)", works) {
        return;
    }
    let dc = start(Some("s3cret")).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    dc.write_kubeconfig(&kc).unwrap();
    let kubeconfig = std::fs::read_to_string(&kc).unwrap();
    assert!(kubeconfig.contains("certificate-authority-data"), "{kubeconfig}");
    let run = move |args: &[&str]| {
        let out = Command::new("kubectl").arg("--kubeconfig").arg(&kc).args(args).output().expect("kubectl runs");
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let (ok, text) = tokio::task::spawn_blocking(move || {
        let (ok, text) = run(&["get", "configmap", "kube-root-ca.crt", "-o", "jsonpath={.data.ca\\.crt}"]);
        let (bad_ok, bad) = run(&["--token", "wrong", "get", "namespaces"]);
        assert!(!bad_ok && bad.contains("Unauthorized"), "a wrong token is refused: {bad}");
        (ok, text)
    })
    .await
    .unwrap();
    assert!(ok, "{text}");
    assert_eq!(text.trim(), dc.ca_pem().unwrap().trim());
}

#[tokio::test]
async fn a_data_dir_keeps_the_ca_and_its_namespaces_get_the_ca_once_tls_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let start_in = |tls: bool| {
        let data_dir = Some(dir.path().join("data"));
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            DevCluster::start(listener, Config { tls, data_dir, ..Default::default() }).await.unwrap()
        }
    };
    let plain = start_in(false).await;
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": "mine"}})).unwrap();
    Api::<Namespace>::all(plain.client()).create(&PostParams::default(), &ns).await.unwrap();
    plain.shutdown().await;

    let first = start_in(true).await;
    let ca = first.ca_pem().unwrap().to_string();
    let mine: Api<ConfigMap> = Api::namespaced(first.client(), "mine");
    assert_eq!(mine.get("kube-root-ca.crt").await.unwrap().data.unwrap()["ca.crt"], ca);
    first.shutdown().await;

    let again = start_in(true).await;
    assert_eq!(again.ca_pem().unwrap(), ca, "a kubeconfig written before the restart stays valid");
}

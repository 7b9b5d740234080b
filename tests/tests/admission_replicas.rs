//! `--admission-cleanup` with replicas: the webhook configurations are shared by every replica
//! that serves admission, so a replica that stops while another still serves keeps them, and
//! the last one removes them. Two controllers in-process on one dev cluster, real HTTP and gRPC.

use std::time::Duration;

use bosun_controller::Settings;
use bosun_controller::coordination::{LeaseSetup, Replicas};
use bosun_controller::endpoints::admission::Setup;
use bosun_devcluster::DevCluster;
use bosun_proto::v1 as pb;
use bosun_tests::{Controller, Scripted, kex, spec, succeed};
use serde_json::json;

const T: Duration = Duration::from_secs(30);

fn replica(addr: &str, name: &str, replicas: &Replicas) -> Settings {
    Settings {
        handlers: vec![addr.to_string()],
        identity: Some(name.into()),
        replicas: replicas.clone(),
        admission: Setup { listen: Some("127.0.0.1:0".into()), cleanup: true, ..Default::default() },
        ..Default::default()
    }
}

async fn configured(client: &kube::Client) -> bool {
    let path = bosun_controller::state::admission::configuration_path("auto.bosun.dev", false);
    bosun_controller::cluster::Cluster::new(client.clone()).get(&path).await.is_ok()
}

#[tokio::test]
async fn the_webhook_configurations_stay_while_another_replica_serves_and_go_with_the_last() {
    let lease = LeaseSetup { name: "admission".into(), namespace: "default".into(), duration: Duration::from_secs(15) };
    let modes = [
        ("shards", Replicas::Shards(lease.clone()), "Shard group 'admission' has 2 member(s)"),
        ("leader election", Replicas::LeaderElection(lease), "The leader is a"),
    ];
    for (mode, replicas, together) in modes {
        let cluster = DevCluster::start_local().await.unwrap();
        let client = cluster.client();
        kex::install_crd(&client).await;
        let server = Scripted::new(vec![(spec("check", pb::HandlerKind::Validate), succeed(json!(null)))]);
        let (addr, stopper) = server.spawn().await;
        let a = Controller::start(client.clone(), replica(&addr, "a", &replicas));
        a.wait_log("ValidatingWebhookConfiguration 'auto.bosun.dev' is created", T).await;
        let b = Controller::start(client.clone(), replica(&addr, "b", &replicas));
        b.wait_log(together, T).await;

        let a_log = a.log_handle();
        a.stop().await;
        let said = a_log.lock().unwrap().join("\n");
        // Replica b's identity with Leases: `b_` and its random suffix.
        let kept = said.lines().any(|l| {
            l.contains("Keeping the admission webhook configurations 'auto.bosun.dev': replica b_") && l.ends_with(" still serves them.")
        });
        assert!(kept, "{mode}: a keeps them:\n{said}");
        assert!(configured(&client).await, "{mode}: b still relies on them");

        let b_log = b.log_handle();
        b.stop().await;
        let said = b_log.lock().unwrap().join("\n");
        assert!(said.contains("Removed the admission webhook configuration at"), "{mode}: the last one removes them:\n{said}");
        assert!(!configured(&client).await, "{mode}: gone with the last replica");
        stopper.stop().await;
    }
}

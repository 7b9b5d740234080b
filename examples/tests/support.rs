//! What the example end-to-end tests share: the dev cluster with the CRD, the example's
//! binary as a real handler server, the controller in-process, and helpers to judge a run.
#![allow(dead_code)] // each test file uses part of it

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bosun_controller::Settings;
use bosun_controller::cluster::{Cluster, apply};
use bosun_devcluster::DevCluster;
use bosun_tests::{Controller, examples_dir, kex, wait_for};

/// The example binaries of this crate, which cargo builds (fresh) for its tests.
pub fn binary(name: &str) -> PathBuf {
    PathBuf::from(match name {
        "minimal" => env!("CARGO_BIN_EXE_minimal"),
        "children" => env!("CARGO_BIN_EXE_children"),
        "exceptions" => env!("CARGO_BIN_EXE_exceptions"),
        "events" => env!("CARGO_BIN_EXE_events"),
        "handlers" => env!("CARGO_BIN_EXE_handlers"),
        "peering" => env!("CARGO_BIN_EXE_peering"),
        "subhandlers" => env!("CARGO_BIN_EXE_subhandlers"),
        "spies" => env!("CARGO_BIN_EXE_spies"),
        "builtins" => env!("CARGO_BIN_EXE_builtins"),
        "filtering" => env!("CARGO_BIN_EXE_filtering"),
        "indexing" => env!("CARGO_BIN_EXE_indexing"),
        "admission" => env!("CARGO_BIN_EXE_admission"),
        other => panic!("no example binary {other}"),
    })
}

pub const T: Duration = Duration::from_secs(30);
pub const OBJ: &str = "[default/kopf-example-1]";

pub struct Run {
    _cluster: DevCluster,
    pub client: kube::Client,
    pub controller: Controller,
    pub port: u16,
    _child: tokio::process::Child,
    _kubeconfig: tempfile::TempDir,
}

/// The dev cluster with the CRD, and the example's handler server, without a controller yet.
pub struct Stage {
    _kubeconfig: tempfile::TempDir,
    cluster: DevCluster,
    pub client: kube::Client,
    port: u16,
    child: tokio::process::Child,
}

pub async fn stage(example: &str) -> Stage {
    stage_with(example, &[]).await
}

/// [`stage`], with extra environment variables for the handler server.
pub async fn stage_with(example: &str, env: &[(&str, &str)]) -> Stage {
    let cluster = DevCluster::start_local().await.unwrap();
    let client = cluster.client();
    kex::install_crd(&client).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // Like `bosun dev`, the handler server gets the cluster's kubeconfig (example 10 uses it).
    let dir = tempfile::tempdir().unwrap();
    cluster.write_kubeconfig(&dir.path().join("kubeconfig")).unwrap();
    let child = spawn_server(example, port, dir.path(), env);
    Stage { _kubeconfig: dir, cluster, client, port, child }
}

/// The example's handler server as a process listening on `port`.
fn spawn_server(example: &str, port: u16, kubeconfig_dir: &std::path::Path, env: &[(&str, &str)]) -> tokio::process::Child {
    tokio::process::Command::new(binary(example))
        .env("BOSUN_LISTEN", format!("127.0.0.1:{port}"))
        .env("KUBECONFIG", kubeconfig_dir.join("kubeconfig"))
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

pub fn start_controller(client: &kube::Client, port: u16) -> Controller {
    Controller::start(client.clone(), Settings { handlers: vec![format!("http://127.0.0.1:{port}")], ..Default::default() })
}

impl Stage {
    /// The handler server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The dev cluster's URL.
    pub fn url(&self) -> String {
        self.cluster.url()
    }

    /// Starts the controller with `client` (another account's) instead of the admin's, which
    /// the run keeps for the test's own requests.
    pub async fn start_as(self, client: &kube::Client) -> Run {
        let controller = start_controller(client, self.port);
        controller.wait_log("registered", T).await;
        Run { _kubeconfig: self._kubeconfig, _cluster: self.cluster, client: self.client, controller, port: self.port, _child: self.child }
    }

    pub async fn start(self) -> Run {
        let controller = start_controller(&self.client, self.port);
        controller.wait_log("registered", T).await;
        Run { _kubeconfig: self._kubeconfig, _cluster: self.cluster, client: self.client, controller, port: self.port, _child: self.child }
    }
}

pub async fn start(example: &str) -> Run {
    stage(example).await.start().await
}

pub async fn apply_obj(client: &kube::Client) {
    apply::apply_path(&Cluster::new(client.clone()), &examples_dir().join("obj.yaml")).await.unwrap();
}

impl Run {
    pub fn cluster(&self) -> Cluster {
        Cluster::new(self.client.clone())
    }

    pub async fn apply_obj(&self) {
        apply_obj(&self.client).await;
    }

    /// Waits until `path` answers 404.
    pub async fn wait_gone(&self, what: &str, path: &str) {
        let cluster = self.cluster();
        wait_for(what, T, || {
            let cluster = cluster.clone();
            async move { matches!(cluster.get(path).await, Err(e) if e.code() == Some(404)) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.controller.log().join("\n")));
    }

    pub async fn delete_obj(&self) {
        kex::delete(&self.client, "default", "kopf-example-1").await;
        self.wait_gone("the object to go", &format!("{}/kopf-example-1", kex::path("default"))).await;
    }

    /// Kills the handler server and starts it again on the same port, as a crash and a
    /// restart by its supervisor would.
    pub async fn restart_server(&mut self, example: &str, env: &[(&str, &str)]) {
        self._child.kill().await.unwrap();
        self._child = spawn_server(example, self.port, self._kubeconfig.path(), env);
    }

    /// Kills the handler server, and leaves it down.
    pub async fn stop_server(&mut self) {
        self._child.kill().await.unwrap();
    }

    /// Replaces the controller by one with `settings` (the handler server's address is
    /// filled in): the new one starts, then the old one stops.
    pub async fn replace_controller(&mut self, settings: Settings) {
        let settings = Settings { handlers: vec![format!("http://127.0.0.1:{}", self.port)], ..settings };
        let old = std::mem::replace(&mut self.controller, Controller::start(self.client.clone(), settings));
        old.stop().await;
    }

    /// Stops the controller, then runs `check` on the cluster that stays.
    pub async fn stop_controller_then<F: std::future::Future<Output = ()>>(self, check: impl FnOnce(kube::Client) -> F) {
        self.controller.stop().await;
        check(self.client.clone()).await;
    }

    /// The dev cluster's kubeconfig, for `kubectl`.
    pub fn kubeconfig(&self) -> PathBuf {
        self._kubeconfig.path().join("kubeconfig")
    }

    /// Stops the controller and starts a new one (a restart: objects are resumed).
    pub async fn restart_controller(&mut self) {
        let old = std::mem::replace(&mut self.controller, start_controller(&self.client, self.port));
        old.stop().await;
        self.controller.wait_log("registered", T).await;
    }

    pub fn succeeded(&self, id: &str) -> usize {
        self.controller.count(&format!("{OBJ} Handler '{id}' succeeded."))
    }

    pub fn assert_clean(&self) {
        let log = self.controller.log();
        for line in &log {
            assert!(!line.contains("failed permanently"), "unexpected permanent failure: {line}");
            assert!(!line.contains("panicked"), "a panic: {line}");
        }
    }

    pub fn dump(&self) -> String {
        self.controller.log().join("\n")
    }
}
